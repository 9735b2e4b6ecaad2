"""The completion sweep's decisions, pinned: it publishes the recorded rounds whose
publisher died first, the events themselves, at most a hundred a sweep by default."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from shared.adapters.embedded.assignment_store import (
    SqliteAssignmentStore,
    SqliteJobBatch,
    SqliteTally,
)
from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.clock import FrozenClock
from shared.domain.events import AssignmentGraded
from shared.domain.grade import GradeResult
from shared.service_layer.assignment_completion import AssignmentCompletion
from shared.service_layer.assignments import Answer, AssignmentService
from tests.fakes import FakePublisher, FakeTaskQueue

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


def test_a_round_check_announces_the_round_once_every_submission_is_final(
    tmp_path: Path,
) -> None:
    db = SqliteDatabase(tmp_path / "g.sqlite3")
    jobs = SqliteJobStore(db, on_write=SqliteTally(db).record)
    store = SqliteAssignmentStore(db)
    queue, publisher, clock = FakeTaskQueue(), FakePublisher(), FrozenClock(T0)
    service = AssignmentService(store, jobs, SqliteJobBatch(db, jobs), queue, clock)
    completion = AssignmentCompletion(store, publisher, clock)
    assignment, _ = service.create("client-a", "k", "t", "x", 10.0, "v1")
    service.submit_batch("client-a", assignment.id, [Answer("s1", "a")])
    [task] = queue.tasks

    assert completion.check(assignment.id, "client-a", 0) is False  # still being graded
    assert publisher.events == []
    jobs.update(task.job_id, lambda j: j.claim("w", clock.now(), timedelta(seconds=30)))
    jobs.update(task.job_id, lambda j: j.succeed("w", GradeResult(4, 10, "ok"), clock.now()))
    assert completion.check(assignment.id, "client-a", 0) is True
    [graded] = publisher.events
    assert isinstance(graded, AssignmentGraded)
    assert (graded.assignment_id, graded.client_id, graded.round) == (
        assignment.id,
        "client-a",
        0,
    )
    assert (graded.submissions, graded.succeeded, graded.mean_score) == (1, 1, 4.0)
