"""What the recovery sweep decides, pinned value by value.

The queries it sends (status, age limit, page size, where a page starts), the queue
names it asks about, the task it enqueues (name, job id, schedule time), the job it
stores, and its report, on a clock the test moves.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import TypedDict, Unpack, cast

import pytest

from shared.adapters.embedded.assignment_store import (
    SqliteAssignmentStore,
    SqliteJobBatch,
    SqliteTally,
)
from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.clock import FrozenClock
from shared.config.budget import Budget
from shared.config.queues import load_queues
from shared.domain.errors import DependencyUnavailable
from shared.domain.events import AssignmentGraded
from shared.domain.grade import GradeResult
from shared.domain.ids import job_id_for, task_name_for
from shared.domain.job import ANNOUNCE_LEASE, GradingRequest, Job, JobError
from shared.domain.status import JobStatus
from shared.ports import JobStore, TaskSpec
from shared.service_layer.assignment_completion import AssignmentCompletion
from shared.service_layer.assignments import Answer, AssignmentService
from shared.service_layer.recovery import RecoveryService, SweepReport
from tests.fakes import FakePublisher, FakeTaskQueue

LEASE_S = 12.0
STALE = timedelta(seconds=2 * LEASE_S)
MAX_ATTEMPTS = 4
REQUEST = GradingRequest(submission_id="s", answer="a", rubric="r")

Find = tuple[JobStatus, datetime, int, datetime | None, str | None]


class RecordingStore:
    """The SQLite store, recording the sweep's queries; its updates can be made to fail."""

    def __init__(self, inner: JobStore) -> None:
        self.inner = inner
        self.finds: list[Find] = []
        self.unannounced: list[tuple[datetime, int]] = []
        self.fail_updates = False
        #: When set, what find_unannounced answers (as another instance's store might).
        self.unannounced_answer: list[Job] | None = None

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def find(
        self,
        status: JobStatus,
        updated_before: datetime,
        limit: int,
        updated_after: datetime | None = None,
        after_id: str | None = None,
    ) -> list[Job]:
        self.finds.append((status, updated_before, limit, updated_after, after_id))
        return self.inner.find(
            status, updated_before, limit, updated_after=updated_after, after_id=after_id
        )

    def find_unannounced(self, updated_before: datetime, limit: int) -> list[Job]:
        self.unannounced.append((updated_before, limit))
        if self.unannounced_answer is not None:
            return self.unannounced_answer
        return self.inner.find_unannounced(updated_before, limit)

    def update(self, job_id: str, mutate: Callable[[Job], Job]) -> Job:
        if self.fail_updates:
            raise DependencyUnavailable("database is locked")
        return self.inner.update(job_id, mutate)


class SweepOptions(TypedDict, total=False):
    """The sweeper's tunables a test may change (RecoveryService's keyword arguments)."""

    max_replays: int
    batch: int
    max_scan: int


class Sweep:
    """A sweeper over a recording store, a recording queue and publisher, a frozen clock."""

    def __init__(self, tmp_path: Path) -> None:
        self.clock = FrozenClock()
        self.store = RecordingStore(SqliteJobStore(SqliteDatabase(tmp_path / "jobs.sqlite3")))
        self.queue = FakeTaskQueue()
        self.publisher = FakePublisher()
        self.budget = Budget(
            grader_timeout_s=300,
            lease_s=LEASE_S,
            heartbeat_s=4,
            result_write_retry_s=10,
            drain_grace_s=5,
            job_max_attempts=MAX_ATTEMPTS,
            queue=load_queues()["grading"],
        ).check()

    def service(self, **options: Unpack[SweepOptions]) -> RecoveryService:
        return RecoveryService(
            cast(JobStore, self.store),
            self.queue,
            self.publisher,
            self.clock,
            self.budget,
            **options,
        )

    def seed(self, key: str, request: GradingRequest = REQUEST) -> str:
        job_id = job_id_for("c", key)
        self.store.inner.create(Job.new(job_id, "c", request, "fp", self.clock.now()))
        return job_id

    def seed_many(self, n: int) -> list[str]:
        """n jobs, one second apart (so their updated_at differ)."""
        ids = []
        for i in range(n):
            ids.append(self.seed(f"k{i}"))
            self.clock.advance(timedelta(seconds=1))
        return ids

    def job(self, job_id: str) -> Job:
        job = self.store.inner.get(job_id)
        assert job is not None
        return job

    def put(self, job_id: str, mutate: Callable[[Job], Job]) -> Job:
        return self.store.inner.update(job_id, mutate)

    def queued(self, job_id: str, generation: int = 0) -> None:
        self.queue.enqueue(TaskSpec(task_name_for(job_id, generation), job_id))

    def finished_unannounced(self, key: str) -> str:
        job_id = self.seed(key)
        self.put(job_id, lambda j: j.claim("w", self.clock.now(), timedelta(seconds=LEASE_S)))
        self.put(job_id, lambda j: j.succeed("w", GradeResult(1, 10, "ok"), self.clock.now()))
        return job_id


@pytest.fixture
def s(tmp_path: Path) -> Sweep:
    return Sweep(tmp_path)


def nothing() -> dict[str, list[str]]:
    return SweepReport().as_dict()


# --- what it asks ------------------------------------------------------------------------


def test_the_sweep_asks_for_stale_jobs_of_each_open_status_and_for_unannounced_ones(
    s: Sweep,
) -> None:
    now = s.clock.now()
    assert s.service().sweep().as_dict() == nothing()
    before = now - STALE
    assert s.store.finds == [
        (JobStatus.PENDING, before, 100, None, None),
        (JobStatus.RETRYING, before, 100, None, None),
        (JobStatus.RUNNING, before, 100, None, None),
    ]
    assert s.store.unannounced == [(now - timedelta(minutes=1), 100)]


def test_stale_jobs_are_read_page_by_page_after_the_last_ones_updated_at_and_id(
    s: Sweep,
) -> None:
    ids = s.seed_many(6)
    for job_id in ids:
        s.queued(job_id)  # their tasks are still queued: nothing to do but look
    s.clock.advance(timedelta(hours=1))
    assert s.service(batch=3).sweep().as_dict() == nothing()
    stamps = [s.job(i).updated_at for i in ids]
    before = s.clock.now() - STALE
    assert [f for f in s.store.finds if f[0] is JobStatus.PENDING] == [
        (JobStatus.PENDING, before, 3, None, None),
        (JobStatus.PENDING, before, 3, stamps[2], ids[2]),
        (JobStatus.PENDING, before, 3, stamps[5], ids[5]),
    ]
    assert s.queue.asked == [task_name_for(i, 0) for i in ids]


def test_stale_jobs_that_share_an_updated_at_across_a_page_boundary_are_each_read(
    s: Sweep,
) -> None:
    ids = sorted(s.seed(f"k{i}") for i in range(5))  # all created at one moment
    s.clock.advance(timedelta(hours=1))
    report = s.service(batch=2).sweep()
    assert sorted(report.replayed) == ids
    assert s.queue.asked == [task_name_for(i, 0) for i in ids]  # in id order, each once


@pytest.mark.parametrize(("max_scan", "pages"), [(4, 2), (5, 3)])
def test_a_sweep_reads_whole_pages_until_it_scanned_max_scan_jobs_of_a_status(
    s: Sweep, max_scan: int, pages: int
) -> None:
    ids = s.seed_many(7)
    for job_id in ids:
        s.queued(job_id)
    s.clock.advance(timedelta(hours=1))
    s.service(batch=2, max_scan=max_scan).sweep()
    assert s.queue.asked == [task_name_for(i, 0) for i in ids[: 2 * pages]]
    assert len([f for f in s.store.finds if f[0] is JobStatus.PENDING]) == pages


class EndlessStore(RecordingStore):
    """A store with more stale pending jobs than any sweep reads: every page is full."""

    def find(
        self,
        status: JobStatus,
        updated_before: datetime,
        limit: int,
        updated_after: datetime | None = None,
        after_id: str | None = None,
    ) -> list[Job]:
        self.finds.append((status, updated_before, limit, updated_after, after_id))
        if status is not JobStatus.PENDING:
            return []
        start = len(self.finds) * limit
        return [
            Job.new(f"j{start + n}", "c", REQUEST, "fp", updated_before - timedelta(hours=1))
            for n in range(limit)
        ]


def test_by_default_a_sweep_reads_2000_jobs_of_a_status_in_pages_of_100(s: Sweep) -> None:
    s.store = EndlessStore(s.store.inner)
    s.queue.available = False  # each job is only looked at (and reported unreachable)
    report = s.service().sweep()
    pending = [f for f in s.store.finds if f[0] is JobStatus.PENDING]
    assert len(pending) == 20 and {f[2] for f in pending} == {100}
    assert len(report.errors) == 2000 and len(set(report.errors)) == 2000


def test_a_job_younger_than_two_leases_is_not_looked_at(s: Sweep) -> None:
    job_id = s.seed("young")
    s.clock.advance(STALE - timedelta(microseconds=1))
    s.service().sweep()
    assert s.queue.asked == []
    s.clock.advance(timedelta(microseconds=2))
    assert s.service().sweep().replayed == [job_id]


# --- what it decides per job --------------------------------------------------------------


def test_a_taskless_job_is_replayed_with_a_new_task_due_now(s: Sweep) -> None:
    job_id = s.seed("orphan")
    s.clock.advance(timedelta(hours=1))
    now = s.clock.now()
    report = s.service().sweep()
    assert report.as_dict() == {**nothing(), "replayed": [job_id]}
    assert s.queue.asked == [task_name_for(job_id, 0)]
    assert s.queue.tasks == [TaskSpec(task_name_for(job_id, 1), job_id, now)]
    job = s.job(job_id)
    assert job.generation == 1 and job.updated_at == now and job.status is JobStatus.PENDING
    assert job.attempts == 0


@pytest.mark.parametrize(
    ("offset", "due_later"), [(timedelta(hours=2), True), (timedelta(0), False)]
)
def test_a_replayed_scheduled_job_keeps_waiting_for_its_not_before(
    s: Sweep, offset: timedelta, due_later: bool
) -> None:
    start = s.clock.now()
    not_before = start + timedelta(hours=1) + offset
    request = GradingRequest(
        submission_id="s", answer="a", rubric="r", not_before=not_before.isoformat()
    )
    job_id = s.seed("scheduled", request)
    s.clock.advance(timedelta(hours=1))
    s.service().sweep()
    due = not_before if due_later else s.clock.now()
    assert s.queue.tasks == [TaskSpec(task_name_for(job_id, 1), job_id, due)]


def test_a_running_job_with_a_live_lease_is_left_to_its_attempt(s: Sweep) -> None:
    job_id = s.seed("live")
    s.put(job_id, lambda j: j.claim("w", s.clock.now(), timedelta(hours=2)))
    s.clock.advance(timedelta(hours=1))
    assert s.service().sweep().as_dict() == nothing()
    assert s.queue.asked == [] and s.job(job_id).generation == 0


def test_a_running_job_whose_lease_ran_out_and_whose_task_is_gone_is_replayed(
    s: Sweep,
) -> None:
    job_id = s.seed("dead")
    s.put(job_id, lambda j: j.claim("w", s.clock.now(), timedelta(seconds=LEASE_S)))
    s.clock.advance(timedelta(hours=1))
    assert s.service().sweep().as_dict() == {**nothing(), "replayed": [job_id]}
    assert s.job(job_id).generation == 1


@pytest.mark.parametrize(
    ("generation", "attempts", "replayed"),
    [(2, 3, True), (3, 0, False), (0, MAX_ATTEMPTS, False), (0, MAX_ATTEMPTS - 1, True)],
)
def test_a_job_is_failed_once_its_replays_or_attempts_are_spent(
    s: Sweep, generation: int, attempts: int, replayed: bool
) -> None:
    job_id = s.seed("budget")
    past = s.clock.now()
    for n in range(attempts):
        owner = f"w{n}"
        s.put(job_id, lambda j, o=owner: j.claim(o, past, timedelta(seconds=1)))  # type: ignore[misc]
        s.put(job_id, lambda j, o=owner: j.retry_later(o, JobError("x", "y"), past))  # type: ignore[misc]
    for _ in range(generation):
        s.put(job_id, lambda j: j.replay(past))
    s.clock.advance(timedelta(hours=1))
    now = s.clock.now()
    report = s.service(max_replays=3).sweep()
    job = s.job(job_id)
    if replayed:
        assert report.as_dict() == {**nothing(), "replayed": [job_id]}
        assert job.generation == generation + 1 and s.publisher.events == []
    else:
        assert report.as_dict() == {**nothing(), "failed": [job_id], "announced": [job_id]}
        assert job.status is JobStatus.FAILED and job.completed_at == now
        assert job.error == JobError(
            "retries-exhausted", "the job could not be completed after all retries"
        )
        assert job.event_published and [e.job_id for e in s.publisher.completions()] == [job_id]
        assert s.queue.tasks == []


def test_an_unreachable_queue_leaves_the_job_and_reports_it(s: Sweep) -> None:
    job_id = s.seed("q")
    s.queue.available = False
    s.clock.advance(timedelta(hours=1))
    assert s.service().sweep().as_dict() == {**nothing(), "errors": [job_id]}
    assert s.job(job_id).generation == 0


def test_a_queue_that_cannot_say_whether_its_task_exists_leaves_the_job_and_reports_it(
    s: Sweep, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = s.seed("q")
    s.clock.advance(timedelta(hours=1))

    def unreachable(task_name: str, queue: str | None = None) -> bool:
        raise DependencyUnavailable("queue down")

    monkeypatch.setattr(s.queue, "exists", unreachable)
    assert s.service().sweep().as_dict() == {**nothing(), "errors": [job_id]}
    assert s.job(job_id).generation == 0 and s.queue.tasks == []


@pytest.mark.parametrize("spent", [False, True])
def test_a_store_failing_the_replay_or_the_give_up_is_reported_as_an_error(
    s: Sweep, spent: bool
) -> None:
    job_id = s.seed("x")
    if spent:
        for _ in range(3):
            s.put(job_id, lambda j: j.replay(s.clock.now()))
    s.clock.advance(timedelta(hours=1))
    s.store.fail_updates = True
    assert s.service().sweep().as_dict() == {**nothing(), "errors": [job_id]}


# --- announcing --------------------------------------------------------------------------


def test_an_unannounced_final_job_is_announced_once_its_announcing_lease_ran_out(
    s: Sweep,
) -> None:
    job_id = s.finished_unannounced("silent")
    s.clock.advance(ANNOUNCE_LEASE)  # the query's age limit is not passed yet
    assert s.service().sweep().as_dict() == nothing()
    s.clock.advance(timedelta(microseconds=1))
    report = s.service().sweep()
    assert report.as_dict() == {**nothing(), "announced": [job_id]}
    assert s.job(job_id).event_published and [e.job_id for e in s.publisher.completions()] == [
        job_id
    ]


def test_unannounced_jobs_are_announced_page_after_page(s: Sweep) -> None:
    ids = [s.finished_unannounced(f"k{i}") for i in range(5)]
    s.clock.advance(timedelta(hours=1))
    report = s.service(batch=2).sweep()
    assert sorted(report.announced) == sorted(ids)
    assert len(s.store.unannounced) == 3
    assert sorted(e.job_id for e in s.publisher.completions()) == sorted(ids)


def test_announcing_stops_at_max_scan(s: Sweep) -> None:
    for i in range(5):
        s.finished_unannounced(f"k{i}")
    s.clock.advance(timedelta(hours=1))
    report = s.service(batch=2, max_scan=4).sweep()
    assert len(report.announced) == 4 and len(s.store.unannounced) == 2


def test_a_page_whose_announcements_all_fail_ends_the_sweep(s: Sweep) -> None:
    ids = [s.finished_unannounced(f"k{i}") for i in range(3)]
    s.clock.advance(timedelta(hours=1))
    s.publisher.failures = 100
    report = s.service(batch=2).sweep()
    assert report.announced == [] and len(report.errors) == 2
    assert set(report.errors) <= set(ids) and len(s.store.unannounced) == 1


def test_an_unannounced_job_whose_announcing_lease_is_live_is_left_to_its_holder(
    s: Sweep,
) -> None:
    job_id = s.finished_unannounced("holder")
    s.store.unannounced_answer = [s.job(job_id)]  # e.g. read on a clock running late
    assert s.service().sweep().as_dict() == nothing()
    assert s.publisher.events == [] and not s.job(job_id).event_published


def test_announcing_a_rounds_last_job_announces_the_round(tmp_path: Path) -> None:
    db = SqliteDatabase(tmp_path / "g.sqlite3")
    jobs = SqliteJobStore(db, on_write=SqliteTally(db).record)
    assignments = SqliteAssignmentStore(db)
    queue, publisher, clock = FakeTaskQueue(), FakePublisher(), FrozenClock()
    service = AssignmentService(assignments, jobs, SqliteJobBatch(db, jobs), queue, clock)
    assignment, _ = service.create("c", "k", "t", "x", 10.0, "v1")
    service.submit_batch("c", assignment.id, [Answer("s1", "an answer")])
    [job_id] = [t.job_id for t in queue.tasks]
    jobs.update(job_id, lambda j: j.claim("w", clock.now(), timedelta(seconds=LEASE_S)))
    jobs.update(job_id, lambda j: j.succeed("w", GradeResult(6, 10, "ok"), clock.now()))
    clock.advance(timedelta(hours=1))  # the worker died before announcing it
    budget = Sweep(tmp_path).budget
    completion = AssignmentCompletion(assignments, publisher, clock)
    sweeper = RecoveryService(jobs, queue, publisher, clock, budget, assignments=completion)
    assert sweeper.sweep().announced == [job_id]
    graded = [e for e in publisher.events if isinstance(e, AssignmentGraded)]
    assert [(e.assignment_id, e.round, e.submissions, e.mean_score) for e in graded] == [
        (assignment.id, 0, 1, 6.0)
    ]
