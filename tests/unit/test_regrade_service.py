"""A regrade cut short (a job still announcing) is finished by asking again, and its round
is announced once, only when every submission it expects is graded."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from shared.adapters.embedded.assignment_store import (
    SqliteAssignmentStore,
    SqliteJobBatch,
    SqliteTally,
)
from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.clock import FrozenClock
from shared.domain.errors import AssignmentBusy
from shared.domain.events import AssignmentGraded
from shared.domain.grade import GradeResult
from shared.service_layer import regrade as regrade_module
from shared.service_layer.assignment_completion import AssignmentCompletion
from shared.service_layer.assignments import Answer, AssignmentService
from shared.service_layer.regrade import Regrader
from tests.fakes import FakePublisher, FakeTaskQueue

LEASE = timedelta(seconds=30)


def test_a_regrade_resumes_and_its_round_ends_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(regrade_module, "ANNOUNCE_WAITS_S", ())
    db = SqliteDatabase(tmp_path / "g.sqlite3")
    jobs = SqliteJobStore(db, on_write=SqliteTally(db).record)
    store = SqliteAssignmentStore(db)
    queue, publisher, clock = FakeTaskQueue(), FakePublisher(), FrozenClock()
    service = AssignmentService(store, jobs, SqliteJobBatch(db, jobs), queue, clock)
    completion = AssignmentCompletion(store, publisher, clock)
    regrader = Regrader(service, store, jobs, queue, clock, completion.check)
    assignment, _ = service.create("c", "k", "t", "x", 10.0, "v1")
    service.submit_batch("c", assignment.id, [Answer(f"s{i}", f"a {i}") for i in range(3)])

    def grade(job_id: str, score: float, announce: bool = True) -> None:
        jobs.update(job_id, lambda j: j.claim("w", clock.now(), LEASE))
        done = jobs.update(
            job_id, lambda j: j.succeed("w", GradeResult(score, 10.0, "ok"), clock.now())
        )
        completion.on_final(done)
        if announce:
            jobs.update(job_id, lambda j: j.mark_event_published(clock.now()))

    ids = [t.job_id for t in queue.tasks]
    grade(ids[0], 5.0)
    with pytest.raises(AssignmentBusy):
        regrader.regrade("c", assignment.id)  # round 0 is still being graded
    grade(ids[1], 6.0)
    grade(ids[2], 7.0, announce=False)  # its event is still going out
    started = regrader.regrade("c", assignment.id, rubric="y")
    assert (started.round, started.expected) == (1, 3)
    assert len(queue.tasks) == 5  # two moved, one left
    for job_id in ids[:2]:
        grade(job_id, 9.0)
    assert [e for e in publisher.events if isinstance(e, AssignmentGraded)][1:] == []
    jobs.update(ids[2], lambda j: j.mark_event_published(clock.now()))
    regrader.regrade("c", assignment.id)  # asked again: finishes moving, opens nothing new
    assert store.get(assignment.id).round == 1  # type: ignore[union-attr]
    assert len(queue.tasks) == 6
    grade(ids[2], 9.0)
    graded = [e for e in publisher.events if isinstance(e, AssignmentGraded)]
    assert [(e.round, e.submissions, e.mean_score) for e in graded] == [(0, 3, 6.0), (1, 3, 9.0)]
    report = regrader.report("c", assignment.id, threshold=2.5)
    assert (report.compared, report.mean_shift, report.changed) == (3, 3.0, 2)


def test_an_assignment_with_nothing_graded_has_nothing_to_regrade(tmp_path: Path) -> None:
    from shared.domain.errors import ValidationFailed

    db = SqliteDatabase(tmp_path / "g.sqlite3")
    jobs = SqliteJobStore(db, on_write=SqliteTally(db).record)
    store = SqliteAssignmentStore(db)
    queue, clock = FakeTaskQueue(), FrozenClock()
    service = AssignmentService(store, jobs, SqliteJobBatch(db, jobs), queue, clock)
    regrader = Regrader(service, store, jobs, queue, clock)
    assignment, _ = service.create("c", "k", "t", "x", 10.0, "v1")
    with pytest.raises(ValidationFailed):
        regrader.regrade("c", assignment.id)  # no submission at all
    service.submit_batch("c", assignment.id, [Answer("s", "a")])
    [task] = queue.tasks
    jobs.update(task.job_id, lambda j: j.cancel(clock.now()))
    with pytest.raises(ValidationFailed):
        regrader.regrade("c", assignment.id)  # only a cancelled one
    assert store.get(assignment.id).round == 0  # type: ignore[union-attr]


def test_a_regrade_is_graded_in_the_lane_it_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A class regrade never competes with live grading: it goes to the lowest lane.
    monkeypatch.setattr(regrade_module, "ANNOUNCE_WAITS_S", ())
    db = SqliteDatabase(tmp_path / "g.sqlite3")
    jobs = SqliteJobStore(db, on_write=SqliteTally(db).record)
    store = SqliteAssignmentStore(db)
    queue, clock = FakeTaskQueue(), FrozenClock()
    service = AssignmentService(store, jobs, SqliteJobBatch(db, jobs), queue, clock)
    regrader = Regrader(service, store, jobs, queue, clock, lane="bulk")
    assignment, _ = service.create("c", "k", "t", "x", 10.0, "v1")
    service.submit_batch("c", assignment.id, [Answer("s", "a")])
    [task] = queue.tasks
    jobs.update(task.job_id, lambda j: j.claim("w", clock.now(), LEASE))
    jobs.update(task.job_id, lambda j: j.succeed("w", GradeResult(5.0, 10.0, "ok"), clock.now()))
    jobs.update(task.job_id, lambda j: j.mark_event_published(clock.now()))
    regrader.regrade("c", assignment.id, rubric="y")
    first, regraded = queue.tasks
    assert first.queue != "bulk"
    assert regraded.job_id == task.job_id and regraded.queue == "bulk"
    assert jobs.get(task.job_id).lane == "bulk"  # type: ignore[union-attr]


def test_the_regrade_lane_is_the_lowest_priority_one() -> None:
    from shared.config.queues import lanes_by_priority
    from shared.config.settings import Settings

    settings = Settings()
    lowest = lanes_by_priority(settings._queues)[-1]
    assert settings.regrade_lane() == lowest.name
    assert all(q.lane.priority >= lowest.lane.priority for q in settings._queues.values())
    assert settings.regrade_lane() == "bulk"  # as shared/config/queues.json declares them
