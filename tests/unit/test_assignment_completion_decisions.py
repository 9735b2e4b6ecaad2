"""The completion sweep's decisions, pinned: it publishes the recorded rounds whose
publisher died first, the events themselves, at most a hundred a sweep by default."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from shared.adapters.embedded.assignment_store import SqliteAssignmentStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.clock import FrozenClock
from shared.domain.events import AssignmentGraded
from shared.service_layer.assignment_completion import AssignmentCompletion
from tests.fakes import FakePublisher

T0 = datetime(2026, 12, 1, 12, tzinfo=UTC)


def _graded(n: int) -> AssignmentGraded:
    return AssignmentGraded(
        event_id=f"graded-{n:03d}",
        assignment_id=f"asg-{n}",
        client_id="client-a",
        round=0,
        submissions=1,
        succeeded=1,
        failed=0,
        cancelled=0,
        mean_score=5.0,
        occurred_at=T0 + timedelta(seconds=n),
    )


def test_the_sweep_publishes_the_recorded_events_a_hundred_at_a_time(tmp_path: Path) -> None:
    store = SqliteAssignmentStore(SqliteDatabase(tmp_path / "g.sqlite3"))
    events = [_graded(n) for n in range(101)]
    for event in events:
        assert store.record_graded(event)
    publisher = FakePublisher()
    completion = AssignmentCompletion(store, publisher, FrozenClock(T0))

    assert completion.sweep() == [e.event_id for e in events[:100]]
    assert publisher.events == events[:100]
    assert completion.sweep() == [events[100].event_id]
    assert publisher.events == events
    assert completion.sweep() == []
