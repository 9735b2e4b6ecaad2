"""A batch where the task queue is remote: tasks made concurrently (bounded), and the outbox
rule per item when some cannot be made."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from shared.adapters.embedded.assignment_store import (
    SqliteAssignmentStore,
    SqliteJobBatch,
    SqliteTally,
)
from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.clock import FrozenClock
from shared.domain.status import JobStatus
from shared.ports import TaskSpec
from shared.service_layer.assignments import Answer, AssignmentService, ItemStatus
from tests.fakes import FakeTaskQueue


class SlowQueue(FakeTaskQueue):
    """Records how many task creations were in flight at once."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self.in_flight = 0
        self.most = 0

    def enqueue(self, task: TaskSpec) -> bool:
        with self.lock:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
        time.sleep(0.005)
        try:
            with self.lock:
                return super().enqueue(task)
        finally:
            with self.lock:
                self.in_flight -= 1


def service(tmp_path: Path, queue: FakeTaskQueue, parallelism: int) -> AssignmentService:
    db = SqliteDatabase(tmp_path / "g.sqlite3")
    jobs = SqliteJobStore(db, on_write=SqliteTally(db).record)
    return AssignmentService(
        SqliteAssignmentStore(db),
        jobs,
        SqliteJobBatch(db, jobs),
        queue,
        FrozenClock(),
        enqueue_parallelism=parallelism,
    )


def answers(n: int) -> list[Answer]:
    return [Answer(f"s{i}", f"answer {i}") for i in range(n)]


def test_tasks_are_made_concurrently_within_the_bound(tmp_path: Path) -> None:
    queue = SlowQueue()
    assignments = service(tmp_path, queue, parallelism=4)
    assignment, _ = assignments.create("c", "k", "t", "x", 10.0, "v1")
    results = assignments.submit_batch("c", assignment.id, answers(40))
    assert {r.status for r in results} == {ItemStatus.ACCEPTED}
    assert len(queue.tasks) == 40
    assert 1 < queue.most <= 4


def test_items_whose_task_failed_are_refused_and_a_retry_makes_their_tasks(
    tmp_path: Path,
) -> None:
    queue = FakeTaskQueue(available=False)
    assignments = service(tmp_path, queue, parallelism=4)
    assignment, _ = assignments.create("c", "k", "t", "x", 10.0, "v1")
    failed = assignments.submit_batch("c", assignment.id, answers(5))
    assert {r.status for r in failed} == {ItemStatus.REFUSED}
    assert {r.problem.slug for r in failed if r.problem} == {"dependency-unavailable"}
    # The jobs are stored and PENDING: the retried batch (or the sweep) makes their tasks.
    assert all(r.job is not None and r.job.status is JobStatus.PENDING for r in failed)
    queue.available = True
    retried = assignments.submit_batch("c", assignment.id, answers(5))
    assert {r.status for r in retried} == {ItemStatus.EXISTING}
    assert sorted(t.job_id for t in queue.tasks) == sorted(
        r.job.id for r in failed if r.job is not None
    )


def test_the_recovery_sweep_makes_the_task_of_a_batch_job_that_has_none(
    tmp_path: Path,
) -> None:
    from shared.config.settings import Settings
    from shared.service_layer.recovery import RecoveryService
    from tests.fakes import FakePublisher

    queue = FakeTaskQueue(available=False)
    clock = FrozenClock()
    db = SqliteDatabase(tmp_path / "g.sqlite3")
    jobs = SqliteJobStore(db, on_write=SqliteTally(db).record)
    assignments = AssignmentService(
        SqliteAssignmentStore(db), jobs, SqliteJobBatch(db, jobs), queue, clock
    )
    assignment, _ = assignments.create("c", "k", "t", "x", 10.0, "v1")
    refused = assignments.submit_batch("c", assignment.id, answers(3))
    assert {r.status for r in refused} == {ItemStatus.REFUSED} and queue.tasks == []
    queue.available = True  # the client never retries; the sweep finds the jobs
    budget = Settings(data_dir=tmp_path).budget()
    clock.advance(budget.sweep_stale + budget.lease)
    sweep = RecoveryService(jobs, queue, FakePublisher(), clock, budget).sweep()
    assert sorted(sweep.replayed) == sorted(r.job.id for r in refused if r.job)
    assert sorted(t.job_id for t in queue.tasks) == sorted(sweep.replayed)


def test_the_ceiling_admits_what_fits_and_a_retry_is_never_refused_its_own_jobs(
    tmp_path: Path,
) -> None:
    import pytest

    from shared.domain.admission import AdmissionLimits
    from shared.domain.errors import TooManyActiveJobs

    queue = FakeTaskQueue()
    db = SqliteDatabase(tmp_path / "g.sqlite3")
    jobs = SqliteJobStore(db, on_write=SqliteTally(db).record)
    assignments = AssignmentService(
        SqliteAssignmentStore(db),
        jobs,
        SqliteJobBatch(db, jobs),
        queue,
        FrozenClock(),
        limits=AdmissionLimits(per_client=3, backlog=100, retry_after_s=9),
    )
    assignment, _ = assignments.create("c", "k", "t", "x", 10.0, "v1")
    first = assignments.submit_batch("c", assignment.id, answers(5))
    assert [r.status for r in first] == [ItemStatus.ACCEPTED] * 3 + [ItemStatus.REFUSED] * 2
    assert {r.problem.slug for r in first[3:] if r.problem} == {"too-many-active-jobs"}
    # The client is at its ceiling; its retry still gets its three jobs back.
    again = assignments.submit_batch("c", assignment.id, answers(5))
    assert [r.status for r in again] == [ItemStatus.EXISTING] * 3 + [ItemStatus.REFUSED] * 2
    assert len(queue.tasks) == 3
    with pytest.raises(TooManyActiveJobs) as refused:  # nothing of it fits: the whole 429
        assignments.submit_batch("c", assignment.id, [Answer("new", "x")])
    assert refused.value.retry_after_s == 9
