"""What one delivery decides, pinned value by value, on a clock the test moves.

Each test asserts the verdict, the reply's retry hint and reason, the job as stored
(status, attempts, error, lease owner and expiry, timestamps), what the grader received
and the events published. The worker's waits (heartbeat, drain grace, lease waits,
result-write retries) run on `tests.support.worker_time`: time moves only by what the
delivery asked to wait, and the grading ends on the beat the test names.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import cast

import pytest

from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.adapters.embedded.unit_of_work import SqliteUnitOfWork
from shared.clock import FrozenClock
from shared.config.budget import Budget
from shared.config.queues import RetryConfig, load_queues
from shared.domain.errors import (
    DependencyUnavailable,
    GradeqError,
    GraderMisconfigured,
    JobLocked,
    JobNotFound,
    LeaseLost,
    PermanentGradingError,
    ProviderQuotaExhausted,
    TransientGradingError,
)
from shared.domain.events import GradingCompleted
from shared.domain.grade import GradeResult
from shared.domain.ids import completion_event_id, job_id_for, task_name_for
from shared.domain.job import (
    ANNOUNCE_LEASE,
    ATTEMPTS_EXHAUSTED,
    AttemptOutcome,
    GradingRequest,
    Job,
    JobError,
)
from shared.domain.review import HoldReason, Release, ReviewPolicy, ReviewState, ReviewStatus
from shared.domain.status import JobStatus
from shared.logs import job_id_var
from shared.ports import JobStore, TaskQueue, TaskSpec, UnitOfWork
from shared.service_layer.heartbeat import BatchJobUpdates
from shared.service_layer.provider_batches import BatchPolicy, BatchService
from shared.service_layer.worker import (
    QUOTA_WAIT_S,
    WORKER_SHUTDOWN,
    DeliveryResult,
    TaskDelivery,
    Verdict,
    WorkerService,
)
from tests.fakes import FakePublisher, FakeTaskQueue, GraderCall, ScriptedGrader
from tests.support.worker_time import Beats, TestTime, install, manual_heartbeat
from tests.unit.test_provider_batches import ScriptedBatches

REQUEST = GradingRequest(submission_id="s", answer="a", rubric="r", max_score=10)
RESULT = GradeResult(7.0, 10, "scripted feedback", grader="scripted")
#: The budget these tests run on (seconds): distinct numbers, so a swap shows.
TIMEOUT, LEASE, HEARTBEAT, WRITE_RETRY, MAX_ATTEMPTS = 300.0, 12.0, 4.5, 10.0, 4
LAST_RETRY = load_queues()["grading"].retry_config.max_attempts - 1


def make_budget(**changes: float) -> Budget:
    values: dict[str, float] = {
        "grader_timeout_s": TIMEOUT,
        "lease_s": LEASE,
        "heartbeat_s": HEARTBEAT,
        "result_write_retry_s": WRITE_RETRY,
        "drain_grace_s": 5.0,
        "job_max_attempts": MAX_ATTEMPTS,
    }
    values.update(changes)
    return Budget(
        grader_timeout_s=values["grader_timeout_s"],
        lease_s=values["lease_s"],
        heartbeat_s=values["heartbeat_s"],
        result_write_retry_s=values["result_write_retry_s"],
        drain_grace_s=values["drain_grace_s"],
        job_max_attempts=int(values["job_max_attempts"]),
        queue=load_queues()["grading"],
    ).check()


class ControlledStore:
    """The SQLite store, whose next updates can fail and whose job can vanish."""

    def __init__(self, inner: JobStore) -> None:
        self.inner = inner
        self.fail_updates = 0
        self.vanished = False
        self.updates = 0
        #: Called before update number n (0-based) with n, e.g. to let another actor in.
        self.before_update: Callable[[int], object] | None = None

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def get(self, job_id: str) -> Job | None:
        return None if self.vanished else self.inner.get(job_id)

    def update(self, job_id: str, mutate: Callable[[Job], Job]) -> Job:
        self.updates += 1
        if self.before_update is not None:
            self.before_update(self.updates - 1)
        if self.fail_updates > 0:
            self.fail_updates -= 1
            raise DependencyUnavailable("database is locked")
        return self.inner.update(job_id, mutate)

    def update_each(
        self, mutations: Mapping[str, Callable[[Job], Job]]
    ) -> dict[str, Job | GradeqError]:
        """The heartbeat's batched write: one update, failing as a whole."""
        self.updates += 1
        if self.before_update is not None:
            self.before_update(self.updates - 1)
        if self.fail_updates > 0:
            self.fail_updates -= 1
            raise DependencyUnavailable("database is locked")
        return cast(BatchJobUpdates, self.inner).update_each(mutations)


class Harness:
    """A worker on a SQLite store, a frozen clock, a gated grader and scripted waits."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.clock = FrozenClock()
        self.t0 = self.clock.now()
        self.time = TestTime(self.clock)
        self.beats = Beats(self.time)
        self.gate: threading.Event = self.beats
        install(monkeypatch, self.time, self.beats)
        self.db = SqliteDatabase(tmp_path / "jobs.sqlite3")
        self.store = ControlledStore(SqliteJobStore(self.db))
        self.publisher = FakePublisher()
        self.grader = ScriptedGrader(gate=self.gate)

    def service(
        self,
        *errors: Exception,
        retry: RetryConfig | None = None,
        queue: TaskQueue | None = None,
        review_policy: Callable[[Job], ReviewPolicy | None] | None = None,
        uow: UnitOfWork | None = None,
        on_final: Callable[[Job], None] | None = None,
        **changes: float,
    ) -> WorkerService:
        self.grader = ScriptedGrader(*errors, gate=self.gate)
        budget = make_budget(**changes)
        store = cast(JobStore, self.store)
        return WorkerService(
            store,
            self.publisher,
            self.grader,
            self.clock,
            retry or budget.queue.retry_config,
            budget,
            uow=uow,
            queue=queue,
            on_final=on_final,
            review_policy=review_policy,
            heartbeat=manual_heartbeat(store, self.clock, budget, self.time, self.beats),
        )

    def seed(self, key: str = "k") -> str:
        job_id = job_id_for("client-a", key)
        self.store.inner.create(Job.new(job_id, "client-a", REQUEST, "fp", self.clock.now()))
        return job_id

    def job(self, job_id: str) -> Job:
        job = self.store.inner.get(job_id)
        assert job is not None
        return job

    def put(self, job_id: str, mutate: Callable[[Job], Job]) -> Job:
        return self.store.inner.update(job_id, mutate)

    def spend_attempts(self, job_id: str, n: int) -> None:
        """n earlier attempts, each claimed long ago and handed back."""
        past = self.clock.now() - timedelta(hours=2)
        error = JobError("grading-transient", "earlier")
        for i in range(n):
            self._earlier_attempt(job_id, f"earlier{i}", past + timedelta(minutes=i), error)

    def _earlier_attempt(self, job_id: str, owner: str, at: datetime, error: JobError) -> None:
        self.put(job_id, lambda j: j.claim(owner, at, timedelta(seconds=LEASE)))
        self.put(job_id, lambda j: j.retry_later(owner, error, at))

    def snapshot_on(self, beat: int, job_id: str) -> list[Job]:
        seen: list[Job] = []
        self.beats.before[beat] = lambda: seen.append(self.job(job_id))
        return seen


@pytest.fixture
def h(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Harness]:
    harness = Harness(tmp_path, monkeypatch)
    yield harness
    harness.gate.set()  # a grading left blocked by its test ends


def seconds(n: float) -> timedelta:
    return timedelta(seconds=n)


# --- a graded attempt ------------------------------------------------------------------


def test_an_attempt_is_claimed_under_a_lease_graded_once_stored_and_announced(
    h: Harness,
) -> None:
    service = h.service()
    job_id = h.seed()
    claimed = h.snapshot_on(0, job_id)
    h.beats.finish_on = 0
    result = service.handle(TaskDelivery(job_id, "t-abc", 2))

    [job] = claimed
    assert job.status is JobStatus.RUNNING and job.attempts == 1
    assert job.started_at == job.attempt_started_at == job.updated_at == h.t0
    assert job.lease_expires_at == h.t0 + seconds(LEASE)
    assert job.lease_owner is not None and re.fullmatch(r"t-abc/2/[0-9a-f]{8}", job.lease_owner)
    assert h.grader.received == [GraderCall(REQUEST, 1, TIMEOUT)]
    assert h.beats.waits == [HEARTBEAT]

    assert result.verdict is Verdict.DONE
    assert result.retry_after_s is None and result.reason is None
    assert result.job == h.job(job_id)
    done = h.job(job_id)
    assert done.status is JobStatus.SUCCEEDED and done.result == RESULT and done.error is None
    assert done.attempts == 1 and done.completed_at == h.t0 and done.event_published
    assert done.lease_owner is None and done.lease_expires_at is None
    assert [(e.event_id, e.job_id) for e in h.publisher.completions()] == [
        (completion_event_id(job_id), job_id)
    ]


def test_the_grader_runs_on_a_daemon_thread_in_the_deliverys_context_and_is_forgotten(
    h: Harness,
) -> None:
    # The delivery's thread stays free to answer; the heartbeat's one timer renews leases.
    service = h.service()
    job_id = h.seed()
    h.beats.finish_on = 0
    seen_job_ids: list[str | None] = []
    h.beats.before[0] = lambda: seen_job_ids.append(job_id_var.get())
    assert service.handle(TaskDelivery(job_id, "t", 0)).verdict is Verdict.DONE
    [grader_thread] = h.grader.threads
    assert grader_thread is not threading.current_thread() and grader_thread.daemon
    assert grader_thread.name == "grader"  # as thread dumps show it
    assert seen_job_ids == [job_id]  # its log lines name the job
    assert service.gradings_in_flight == 0 and service.heartbeat.wait_s() == float("inf")


def test_a_direct_delivery_owns_its_lease_under_its_own_name(h: Harness) -> None:
    service = h.service()
    job_id = h.seed()
    claimed = h.snapshot_on(0, job_id)
    h.beats.finish_on = 0
    service.handle(TaskDelivery(job_id))
    [job] = claimed
    assert job.lease_owner is not None and re.fullmatch(r"direct/0/[0-9a-f]{8}", job.lease_owner)


def test_every_claim_takes_a_fresh_owner_and_counts_an_attempt(h: Harness) -> None:
    service = h.service(TransientGradingError("busy"))
    job_id = h.seed()
    owners: list[str | None] = []
    h.beats.before[0] = lambda: owners.append(h.job(job_id).lease_owner)
    h.beats.before[1] = lambda: owners.append(h.job(job_id).lease_owner)
    h.beats.finish_on = 0
    assert service.handle(TaskDelivery(job_id, "t-abc", 0)).verdict is Verdict.RETRY
    h.gate.clear()
    h.beats.finish_on = 1
    assert service.handle(TaskDelivery(job_id, "t-abc", 0)).verdict is Verdict.DONE
    assert len(set(owners)) == 2
    assert [c.attempt for c in h.grader.received] == [1, 2]


# --- the heartbeat -----------------------------------------------------------------------


def test_the_lease_is_renewed_one_heartbeat_after_each_renewal(h: Harness) -> None:
    service = h.service()
    job_id = h.seed()
    leases = [h.snapshot_on(n, job_id) for n in range(4)]
    h.beats.finish_on = 3
    result = service.handle(TaskDelivery(job_id, "t", 0))
    assert h.beats.waits == [HEARTBEAT] * 4
    expiries = [seen[0].lease_expires_at for seen in leases]
    assert expiries == [h.t0 + seconds(LEASE + n * HEARTBEAT) for n in range(4)]
    assert [seen[0].updated_at for seen in leases] == [
        h.t0 + seconds(n * HEARTBEAT) for n in range(4)
    ]
    assert result.verdict is Verdict.DONE
    assert h.job(job_id).completed_at == h.t0 + seconds(3 * HEARTBEAT)


@pytest.mark.parametrize(("heartbeat", "lease", "soon"), [(4.5, 12.0, 1.0), (1.5, 12.0, 0.5)])
def test_a_failed_renewal_is_tried_again_soon(
    h: Harness, heartbeat: float, lease: float, soon: float
) -> None:
    service = h.service(heartbeat_s=heartbeat, lease_s=lease)
    job_id = h.seed()
    h.beats.before[0] = lambda: setattr(h.store, "fail_updates", 2)
    renewed = h.snapshot_on(3, job_id)
    h.beats.finish_on = 3
    assert service.handle(TaskDelivery(job_id, "t", 0)).verdict is Verdict.DONE
    assert h.beats.waits == [heartbeat, soon, soon, heartbeat]
    assert renewed[0].lease_expires_at == h.t0 + seconds(heartbeat + 2 * soon + lease)


def test_renewals_failing_until_the_lease_can_have_expired_stop_the_attempt(h: Harness) -> None:
    service = h.service(heartbeat_s=4.0)
    job_id = h.seed()
    claimed: list[Job] = []

    def store_goes_down() -> None:
        claimed.append(h.job(job_id))
        h.store.fail_updates = 100

    h.beats.before[0] = store_goes_down
    result = service.handle(TaskDelivery(job_id, "t", 0))
    # Renewals at 4, 5, ... 12 s fail; at 12 s the lease may be gone: the attempt stops.
    assert h.beats.waits == [4.0] + [1.0] * 8
    assert result.verdict is Verdict.LOCKED and result.job is None
    assert isinstance(result.reason, LeaseLost)
    owner = claimed[0].lease_owner
    assert result.reason.detail == f"attempt {owner} no longer owns job {job_id}"
    job = h.job(job_id)
    assert job.status is JobStatus.RUNNING and job.result is None and h.publisher.events == []


def test_a_renewal_that_finds_another_owner_stops_the_attempt(h: Harness) -> None:
    service = h.service()
    job_id = h.seed()
    later = h.t0 + timedelta(hours=1)
    h.beats.before[0] = lambda: h.put(job_id, lambda j: j.claim("thief", later, seconds(60)))
    result = service.handle(TaskDelivery(job_id, "t", 0))
    assert h.beats.waits == [HEARTBEAT]
    assert result.verdict is Verdict.LOCKED and result.job is None
    assert isinstance(result.reason, LeaseLost) and result.reason.slug == "lease-lost"
    job = h.job(job_id)
    assert job.lease_owner == "thief" and job.attempts == 2 and job.result is None


def test_a_grading_that_outlives_the_dispatch_deadline_lets_its_lease_go(h: Harness) -> None:
    # The queue gave up on the delivery and sends the task again: a grader that never
    # returns must not keep renewing a lease that keeps every later delivery out.
    service = h.service()
    job_id = h.seed()
    deadline = make_budget().queue.dispatch_deadline.total_seconds()
    assert deadline == 600
    result = service.handle(TaskDelivery(job_id, "t", 0))
    renewals = int(deadline // HEARTBEAT)  # the last one before the deadline, at 598.5 s
    assert h.beats.waits == [HEARTBEAT] * (renewals + 1)
    assert result.verdict is Verdict.LOCKED and isinstance(result.reason, LeaseLost)
    job = h.job(job_id)
    assert job.lease_expires_at == h.t0 + seconds(renewals * HEARTBEAT + LEASE)
    assert job.status is JobStatus.RUNNING and job.result is None and h.publisher.events == []


# --- draining ------------------------------------------------------------------------------


def test_a_draining_worker_takes_no_new_attempt(h: Harness) -> None:
    service = h.service()
    job_id = h.seed()
    assert not service.draining
    service.drain(5.0)
    assert service.draining
    result = service.handle(TaskDelivery(job_id, "t", 0))
    assert result.verdict is Verdict.RETRY and result.job is None and result.retry_after_s == 1
    assert isinstance(result.reason, DependencyUnavailable)
    assert result.reason.detail == "the worker is shutting down"
    job = h.job(job_id)
    assert job.status is JobStatus.PENDING and job.attempts == 0 and h.grader.calls == 0


def test_a_grading_past_the_drain_grace_hands_its_attempt_back(h: Harness) -> None:
    service = h.service()
    job_id = h.seed()
    h.beats.before[0] = lambda: service.drain(6.0)
    result = service.handle(TaskDelivery(job_id, "t", 0))
    # The first beat is a heartbeat; the next one ends when the grace does.
    assert h.beats.waits == [HEARTBEAT, 6.0 - HEARTBEAT]
    assert result.verdict is Verdict.RETRY and result.retry_after_s == 1 and result.reason is None
    job = h.job(job_id)
    assert result.job == job
    assert job.status is JobStatus.RETRYING and job.attempts == 1
    assert job.error == JobError(WORKER_SHUTDOWN, "the worker shut down during the attempt")
    assert job.lease_owner is None and job.lease_expires_at is None
    assert job.updated_at == h.t0 + seconds(6.0) and job.result is None


def test_a_grading_that_ends_within_the_drain_grace_is_stored(h: Harness) -> None:
    service = h.service()
    job_id = h.seed()
    h.beats.before[0] = lambda: service.drain(6.0)
    h.beats.finish_on = 1
    result = service.handle(TaskDelivery(job_id, "t", 0))
    assert h.beats.waits == [HEARTBEAT, 6.0 - HEARTBEAT]
    assert result.verdict is Verdict.DONE and h.job(job_id).status is JobStatus.SUCCEEDED


def test_a_second_drain_does_not_move_the_first_ones_deadline(h: Harness) -> None:
    service = h.service()
    job_id = h.seed()

    def drain_twice() -> None:
        service.drain(6.0)
        service.drain(100.0)

    h.beats.before[0] = drain_twice
    result = service.handle(TaskDelivery(job_id, "t", 0))
    assert h.beats.waits == [HEARTBEAT, 6.0 - HEARTBEAT]
    assert result.verdict is Verdict.RETRY


# --- the grader's outcome ------------------------------------------------------------------


def test_a_permanent_error_fails_the_job_with_its_type_and_detail(h: Harness) -> None:
    service = h.service(PermanentGradingError("the rubric is unreadable"))
    job_id = h.seed()
    h.beats.finish_on = 0
    result = service.handle(TaskDelivery(job_id, "t", 0))
    assert result.verdict is Verdict.DONE and result.retry_after_s is None
    job = h.job(job_id)
    assert result.job == job
    assert job.status is JobStatus.FAILED and job.attempts == 1 and job.completed_at == h.t0
    assert job.error == JobError("grading-permanent", "the rubric is unreadable")
    assert job.event_published and [e.outcome for e in h.publisher.completions()] == ["failed"]


def test_no_provider_quota_gives_the_claim_back_uncounted(h: Harness) -> None:
    quota = ProviderQuotaExhausted("no room in this minute's quota", retry_after_s=30)
    service = h.service(quota)
    job_id = h.seed()
    h.beats.finish_on = 0
    result = service.handle(TaskDelivery(job_id, "t", 0))
    assert result.verdict is Verdict.THROTTLED
    assert result.retry_after_s == 30 and result.reason is quota
    job = h.job(job_id)
    assert result.job == job
    assert job.status is JobStatus.RETRYING and job.attempts == 0 and job.started_at is None
    assert job.attempt_started_at is None and job.updated_at == h.t0
    assert job.lease_owner is None and job.lease_expires_at is None and job.error is None
    assert h.publisher.events == []


def test_a_transient_error_hands_the_job_back_for_the_queues_retry(h: Harness) -> None:
    service = h.service(TransientGradingError("provider busy", retry_after_s=12.5))
    job_id = h.seed()
    h.beats.finish_on = 0
    result = service.handle(TaskDelivery(job_id, "t", LAST_RETRY - 1))
    assert result == DeliveryResult(Verdict.RETRY, h.job(job_id), 12.5)
    job = h.job(job_id)
    assert job.status is JobStatus.RETRYING and job.attempts == 1 and job.updated_at == h.t0
    assert job.error == JobError("grading-transient", "provider busy")
    assert job.lease_owner is None and job.lease_expires_at is None
    assert h.publisher.events == []


def test_an_unexpected_grader_error_is_retried_without_a_hint(h: Harness) -> None:
    service = h.service(ValueError("boom"))
    job_id = h.seed()
    h.beats.finish_on = 0
    result = service.handle(TaskDelivery(job_id, "t", 0))
    assert result == DeliveryResult(Verdict.RETRY, h.job(job_id), None)
    assert h.job(job_id).error == JobError("grading-error", "unexpected grader error: ValueError")


def test_a_transient_error_on_the_queues_last_delivery_fails_the_job(h: Harness) -> None:
    service = h.service(TransientGradingError("provider busy"))
    job_id = h.seed()
    h.beats.finish_on = 0
    result = service.handle(TaskDelivery(job_id, "t", LAST_RETRY))
    assert result.verdict is Verdict.DONE and result.retry_after_s is None
    job = h.job(job_id)
    assert job.status is JobStatus.FAILED
    assert job.error == JobError("grading-transient", "provider busy")
    assert [e.job_id for e in h.publisher.completions()] == [job_id]


@pytest.mark.parametrize(
    ("first_claim_ago", "verdict"),
    [(timedelta(minutes=59), Verdict.RETRY), (timedelta(hours=1), Verdict.DONE)],
)
def test_the_last_delivery_is_judged_by_the_time_since_the_first_attempt(
    h: Harness, first_claim_ago: timedelta, verdict: Verdict
) -> None:
    # The queue stops after max_attempts *and* max_retry_duration since the first attempt.
    retry = dataclasses.replace(
        load_queues()["grading"].retry_config, max_retry_duration=timedelta(hours=1)
    )
    service = h.service(TransientGradingError("busy"), retry=retry)
    job_id = h.seed()
    then = h.t0 - first_claim_ago
    h.put(job_id, lambda j: j.claim("earlier", then, seconds(LEASE)))
    h.put(job_id, lambda j: j.retry_later("earlier", JobError("x", "y"), then))
    h.beats.finish_on = 0
    assert service.handle(TaskDelivery(job_id, "t", LAST_RETRY)).verdict is verdict


@pytest.mark.parametrize(
    ("spent", "verdict"), [(MAX_ATTEMPTS - 2, Verdict.RETRY), (MAX_ATTEMPTS - 1, Verdict.DONE)]
)
def test_a_transient_error_on_the_jobs_last_attempt_fails_the_job(
    h: Harness, spent: int, verdict: Verdict
) -> None:
    service = h.service(TransientGradingError("busy"))
    job_id = h.seed()
    h.spend_attempts(job_id, spent)
    h.beats.finish_on = 0
    result = service.handle(TaskDelivery(job_id, "t", 0))
    assert result.verdict is verdict
    assert h.grader.received == [GraderCall(REQUEST, spent + 1, TIMEOUT)]
    expected = JobStatus.FAILED if verdict is Verdict.DONE else JobStatus.RETRYING
    assert h.job(job_id).status is expected


@pytest.mark.parametrize("error", [LeaseLost("j", "me"), JobLocked("j", datetime(2030, 1, 1))])
def test_a_grader_reporting_a_lost_lease_or_lock_answers_locked(
    h: Harness, error: Exception
) -> None:
    service = h.service(error)
    job_id = h.seed()
    h.beats.finish_on = 0
    result = service.handle(TaskDelivery(job_id, "t", 0))
    assert result == DeliveryResult(Verdict.LOCKED, None, reason=cast(LeaseLost, error))
    assert h.job(job_id).status is JobStatus.RUNNING


# --- the claim -----------------------------------------------------------------------------


def test_an_unknown_job_is_dropped(h: Harness) -> None:
    result = h.service().handle(TaskDelivery("nope", "t", 0))
    assert result.verdict is Verdict.DROPPED and result.job is None
    assert isinstance(result.reason, JobNotFound) and h.grader.calls == 0


def test_a_job_whose_attempts_are_spent_is_failed_without_grading(h: Harness) -> None:
    service = h.service()
    job_id = h.seed()
    h.spend_attempts(job_id, MAX_ATTEMPTS)
    result = service.handle(TaskDelivery(job_id, "t", 0))
    assert result.verdict is Verdict.DONE and h.grader.calls == 0
    job = h.job(job_id)
    assert result.job == job
    assert job.status is JobStatus.FAILED and job.attempts == MAX_ATTEMPTS
    assert job.error == JobError(
        ATTEMPTS_EXHAUSTED, f"all {MAX_ATTEMPTS} attempts of the job were used"
    )
    assert job.event_published and [e.outcome for e in h.publisher.completions()] == ["failed"]


def test_a_duplicate_delivery_of_an_announced_job_changes_nothing(h: Harness) -> None:
    service = h.service()
    job_id = h.seed()
    h.beats.finish_on = 0
    service.handle(TaskDelivery(job_id, "t", 0))
    before = h.job(job_id)
    h.clock.advance(seconds(5))
    result = service.handle(TaskDelivery(job_id, "t", 1))
    assert result == DeliveryResult(Verdict.DONE, before)
    assert h.job(job_id) == before and len(h.publisher.events) == 1 and h.grader.calls == 1


def test_a_final_job_whose_announcer_died_is_announced_by_the_next_delivery(
    h: Harness,
) -> None:
    service = h.service()
    job_id = h.seed()
    h.put(job_id, lambda j: j.claim("dead", h.t0, seconds(LEASE)))
    h.put(job_id, lambda j: j.succeed("dead", RESULT, h.t0))
    h.clock.advance(ANNOUNCE_LEASE)  # the announcing lease ran out: its holder died
    result = service.handle(TaskDelivery(job_id, "t", 1))
    assert result.verdict is Verdict.DONE and h.grader.calls == 0
    job = h.job(job_id)
    assert result.job == job and job.event_published and job.updated_at == h.clock.now()
    assert [e.job_id for e in h.publisher.completions()] == [job_id]


def test_a_final_job_being_announced_right_now_answers_locked(h: Harness) -> None:
    service = h.service()
    job_id = h.seed()
    h.put(job_id, lambda j: j.claim("other", h.t0, seconds(LEASE)))
    h.put(job_id, lambda j: j.succeed("other", RESULT, h.t0))
    h.clock.advance(ANNOUNCE_LEASE - seconds(1))
    result = service.handle(TaskDelivery(job_id, "t", 1))
    assert result.verdict is Verdict.LOCKED and result.job is None
    assert isinstance(result.reason, JobLocked)
    assert result.reason.until == h.t0 + ANNOUNCE_LEASE
    assert result.reason.detail == f"job {job_id} is leased until {result.reason.until.isoformat()}"
    assert h.publisher.events == [] and not h.job(job_id).event_published


# --- meeting another attempt's lease ------------------------------------------------------


@pytest.mark.parametrize(
    ("heartbeat", "lease", "poll"), [(4.5, 12.0, 1.5), (15.0, 45.0, 2.0), (0.09, 0.3, 0.05)]
)
def test_a_dead_lease_is_waited_out_polling_then_taken_over(
    h: Harness, heartbeat: float, lease: float, poll: float
) -> None:
    service = h.service(heartbeat_s=heartbeat, lease_s=lease)
    job_id = h.seed()
    # A claim whose holder died: its lease runs out 4.2 polls from now.
    expires = 4.2 * poll
    h.put(job_id, lambda j: j.claim("dead", h.t0 - seconds(lease - expires), seconds(lease)))
    claimed = h.snapshot_on(0, job_id)
    h.beats.finish_on = 0
    result = service.handle(TaskDelivery(job_id, "t", 1))
    # Polls, then one last pause just past the expiry.
    assert h.time.sleeps == pytest.approx([poll] * 4 + [0.2 * poll + 0.01])
    assert result.verdict is Verdict.DONE
    [job] = claimed
    assert job.attempts == 2 and job.lease_owner is not None and job.lease_owner != "dead"
    assert job.attempt_started_at == h.clock.now()  # the clock stood still since the claim
    assert job.lease_expires_at == h.clock.now() + seconds(lease)
    assert h.grader.received == [GraderCall(REQUEST, 2, TIMEOUT)]


def test_a_lease_just_expired_is_taken_over_after_one_short_pause(h: Harness) -> None:
    service = h.service()
    job_id = h.seed()
    h.put(job_id, lambda j: j.claim("dead", h.t0 - seconds(LEASE - 1), seconds(LEASE)))
    h.beats.finish_on = 0
    assert service.handle(TaskDelivery(job_id, "t", 1)).verdict is Verdict.DONE
    assert h.time.sleeps == pytest.approx([1.01])
    assert h.job(job_id).completed_at == h.t0 + seconds(1.01)


def test_a_renewing_holder_makes_a_delivery_answer_locked_after_one_poll(h: Harness) -> None:
    service = h.service()
    job_id = h.seed()
    h.put(job_id, lambda j: j.claim("holder", h.t0, seconds(LEASE)))
    h.time.on_sleep = lambda _: h.put(
        job_id, lambda j: j.renew("holder", h.clock.now(), seconds(LEASE))
    )
    result = service.handle(TaskDelivery(job_id, "t", 1))
    assert h.time.sleeps == [1.5]
    assert result.verdict is Verdict.LOCKED and result.job == h.job(job_id)
    assert isinstance(result.reason, JobLocked)
    assert result.reason.until == h.t0 + seconds(LEASE)
    assert h.job(job_id).lease_owner == "holder" and h.grader.calls == 0


def test_a_holder_with_a_longer_lease_is_waited_for_one_lease_then_locked(h: Harness) -> None:
    service = h.service()
    job_id = h.seed()
    h.put(job_id, lambda j: j.claim("holder", h.t0, seconds(10 * LEASE)))
    result = service.handle(TaskDelivery(job_id, "t", 1))
    assert h.time.sleeps == pytest.approx([1.5] * 8)  # the takeover wait is one lease
    assert result.verdict is Verdict.LOCKED and result.job == h.job(job_id)
    assert isinstance(result.reason, JobLocked) and h.grader.calls == 0


def test_the_queues_last_delivery_waits_for_a_renewing_holder_then_leaves_it_the_job(
    h: Harness,
) -> None:
    service = h.service()
    job_id = h.seed()
    h.put(job_id, lambda j: j.claim("holder", h.t0, seconds(LEASE)))
    h.time.on_sleep = lambda _: h.put(
        job_id, lambda j: j.renew("holder", h.clock.now(), seconds(LEASE))
    )
    result = service.handle(TaskDelivery(job_id, "t", LAST_RETRY))
    # It waits as long as it can still take over and grade before its dispatch deadline.
    patience = make_budget().last_delivery_wait_s
    assert patience == 600 - TIMEOUT - WRITE_RETRY
    assert sum(h.time.sleeps) == pytest.approx(patience)
    assert max(h.time.sleeps) == 1.5 and len(h.time.sleeps) == 194
    assert result == DeliveryResult(Verdict.DONE, h.job(job_id))
    assert h.job(job_id).lease_owner == "holder" and h.grader.calls == 0


def test_a_job_the_holder_finishes_during_the_wait_is_not_graded_again(h: Harness) -> None:
    service = h.service()
    job_id = h.seed()
    h.put(job_id, lambda j: j.claim("holder", h.t0, seconds(LEASE)))

    def holder_finishes(n: int) -> None:
        if n == 1:
            h.put(job_id, lambda j: j.succeed("holder", RESULT, h.clock.now()))
            h.put(job_id, lambda j: j.mark_event_published(h.clock.now()))

    h.time.on_sleep = holder_finishes
    result = service.handle(TaskDelivery(job_id, "t", LAST_RETRY))
    assert h.time.sleeps == [1.5, 1.5]
    assert result == DeliveryResult(Verdict.DONE, h.job(job_id))
    assert h.grader.calls == 0 and h.publisher.events == []


def test_a_dead_holder_finishing_just_before_the_takeover_is_not_graded_again(
    h: Harness,
) -> None:
    service = h.service()
    job_id = h.seed()
    h.put(job_id, lambda j: j.claim("slow", h.t0 - seconds(LEASE - 1), seconds(LEASE)))

    def slow_holder_finishes(n: int) -> None:
        if n == 1:  # between the wait's last read and the takeover's claim
            h.put(job_id, lambda j: j.succeed("slow", RESULT, h.clock.now()))
            h.put(job_id, lambda j: j.mark_event_published(h.clock.now()))

    h.store.before_update = slow_holder_finishes
    result = service.handle(TaskDelivery(job_id, "t", 1))
    assert h.store.updates == 2 and h.time.sleeps == pytest.approx([1.01])
    assert result == DeliveryResult(Verdict.DONE, h.job(job_id))
    assert h.grader.calls == 0 and h.publisher.events == []


def test_a_job_that_vanishes_during_the_wait_is_dropped(h: Harness) -> None:
    service = h.service()
    job_id = h.seed()
    h.put(job_id, lambda j: j.claim("holder", h.t0, seconds(LEASE)))
    h.time.on_sleep = lambda _: setattr(h.store, "vanished", True)
    result = service.handle(TaskDelivery(job_id, "t", 1))
    assert result.verdict is Verdict.DROPPED and result.job is None
    assert isinstance(result.reason, JobNotFound) and result.reason.detail == job_id


# --- storing the outcome ---------------------------------------------------------------


def test_a_briefly_unavailable_store_gets_the_result_after_backing_off(h: Harness) -> None:
    service = h.service()
    job_id = h.seed()
    h.beats.before[0] = lambda: setattr(h.store, "fail_updates", 3)
    h.beats.finish_on = 0
    result = service.handle(TaskDelivery(job_id, "t", 0))
    assert h.time.sleeps == pytest.approx([0.1, 0.2, 0.4])
    assert result.verdict is Verdict.DONE and h.grader.calls == 1
    assert h.job(job_id).completed_at == h.t0 + seconds(0.7)


def test_a_store_down_longer_than_the_write_retry_budget_fails_the_delivery(h: Harness) -> None:
    service = h.service()
    job_id = h.seed()
    h.beats.before[0] = lambda: setattr(h.store, "fail_updates", 100)
    h.beats.finish_on = 0
    with pytest.raises(DependencyUnavailable):
        service.handle(TaskDelivery(job_id, "t", 0))
    # Doubling from 0.1 s, capped at 2 s, while the next pause still ends within 10 s.
    assert h.time.sleeps == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0, 2.0])
    assert h.job(job_id).status is JobStatus.RUNNING


# --- two deliveries of one job -----------------------------------------------------------


def _renew_the_holders_lease(h: Harness, job_id: str) -> None:
    """What the grading delivery's heartbeat does while the other delivery polls."""
    h.put(job_id, lambda j: j.renew(j.lease_owner or "", h.clock.now(), seconds(LEASE)))


def test_a_second_delivery_while_the_first_grades_answers_locked_and_grades_nothing(
    h: Harness,
) -> None:
    service = h.service()
    job_id = h.seed()
    second: list[DeliveryResult] = []

    def deliver_again() -> None:
        h.time.on_sleep = lambda _: _renew_the_holders_lease(h, job_id)
        second.append(service.handle(TaskDelivery(job_id, "t", 1)))
        h.time.on_sleep = None

    h.beats.before[0] = deliver_again
    h.beats.finish_on = 0
    first = service.handle(TaskDelivery(job_id, "t", 0))
    [locked] = second
    assert locked.verdict is Verdict.LOCKED and isinstance(locked.reason, JobLocked)
    assert locked.reason.until == h.t0 + seconds(LEASE)
    assert first.verdict is Verdict.DONE
    assert h.grader.received == [GraderCall(REQUEST, 1, TIMEOUT)]
    assert [e.job_id for e in h.publisher.completions()] == [job_id]
    # A third delivery after the end is a duplicate.
    assert service.handle(TaskDelivery(job_id, "t", 2)) == DeliveryResult(
        Verdict.DONE, h.job(job_id)
    )
    assert h.grader.calls == 1 and len(h.publisher.events) == 1


def test_a_second_delivery_takes_over_when_the_first_stops_renewing(h: Harness) -> None:
    service = h.service()
    job_id = h.seed()
    second: list[DeliveryResult] = []

    def deliver_again() -> None:
        # The first delivery's heartbeat is gone (its instance froze): nobody renews.
        h.beats.finish_on = 1  # the second delivery's first beat
        second.append(service.handle(TaskDelivery(job_id, "t", 1)))

    h.beats.before[0] = deliver_again
    first = service.handle(TaskDelivery(job_id, "t", 0))
    [took_over] = second
    assert took_over.verdict is Verdict.DONE and took_over.job is not None
    assert took_over.job.attempts == 2 and took_over.job.status is JobStatus.SUCCEEDED
    assert sum(h.time.sleeps) == pytest.approx(LEASE)  # it waited exactly one lease
    # The first delivery's outcome is refused: its lease was taken.
    assert first.verdict is Verdict.LOCKED and isinstance(first.reason, LeaseLost)
    assert [c.attempt for c in h.grader.received] == [1, 2]
    assert len(h.publisher.events) == 1


def test_the_write_retry_budget_ends_where_the_next_pause_would_pass_it(h: Harness) -> None:
    service = h.service(result_write_retry_s=0.1)
    job_id = h.seed()
    h.beats.before[0] = lambda: setattr(h.store, "fail_updates", 100)
    h.beats.finish_on = 0
    with pytest.raises(DependencyUnavailable):
        service.handle(TaskDelivery(job_id, "t", 0))
    # A first pause ending exactly at the budget is still taken; the next is not.
    assert h.time.sleeps == [0.1]


# --- a task handed on, a provider batch's answer ---------------------------------------


def test_a_redelivered_deferring_task_is_acknowledged_while_its_successor_waits_in_its_lane(
    h: Harness,
) -> None:
    queue = FakeTaskQueue()
    service = h.service(queue=queue)
    job_id = job_id_for("client-a", "k")
    h.store.inner.create(Job.new(job_id, "client-a", REQUEST, "fp", h.t0, lane="bulk"))
    deferred = h.put(job_id, lambda j: j.claim("o", h.t0, seconds(LEASE)).defer("o", h.t0))
    # The successor waits in the job's own lane; the default queue holds no such task.
    queue.enqueue(TaskSpec(deferred.task_name, job_id, queue="bulk"))
    h.beats.finish_on = 0
    result = service.handle(TaskDelivery(job_id, task_name_for(job_id, 0), 0))
    assert result.verdict is Verdict.DONE and result.job is None
    assert h.job(job_id) == deferred and h.grader.received == []


def _waiting_in_batch(h: Harness, job_id: str) -> Job:
    def submit(job: Job) -> Job:
        gathered = job.start_attempt("w", h.t0, seconds(LEASE), MAX_ATTEMPTS)
        gathered = gathered.enter_batch("w", "openai", h.t0, seconds(LEASE))
        reserved = gathered.submit_batch(None, "pending/t1", h.t0, seconds(LEASE))
        return reserved.submit_batch("pending/t1", "batch_1", h.t0, timedelta(hours=25))

    return h.put(job_id, submit)


def test_a_batch_answer_without_review_rules_is_stored_and_announced(h: Harness) -> None:
    service = h.service()
    job = _waiting_in_batch(h, h.seed())
    h.clock.advance(seconds(60))
    done = service.record_batch_answer(job, "batch_1", RESULT)
    assert done == h.job(job.id)
    assert done.status is JobStatus.SUCCEEDED and done.result == RESULT
    assert done.review is None and done.event_published
    assert done.completed_at == h.t0 + seconds(60)
    [event] = h.publisher.events
    assert isinstance(event, GradingCompleted)
    assert (event.event_id, event.job_id) == (completion_event_id(job.id), job.id)


def test_a_batch_answer_is_held_by_the_jobs_review_rules_as_of_its_storing(
    h: Harness,
) -> None:
    asked: list[str] = []
    policy = ReviewPolicy(sample_rate=1.0, release=Release.AFTER_REVIEW)

    def rules(job: Job) -> ReviewPolicy:
        asked.append(job.id)
        return policy

    service = h.service(review_policy=rules)
    job = _waiting_in_batch(h, h.seed())
    h.clock.advance(seconds(60))
    done = service.record_batch_answer(job, "batch_1", RESULT)
    assert asked == [job.id]
    held = ReviewState(
        ReviewStatus.HELD, (HoldReason.SAMPLED,), Release.AFTER_REVIEW, h.t0 + seconds(60), 0
    )
    assert done.review == held and h.job(job.id).review == held
    assert done.status is JobStatus.SUCCEEDED and done.result == RESULT


# --- no provider quota: the job handed on to a new task --------------------------------


def test_no_provider_quota_with_a_queue_defers_the_job_to_a_new_task_due_after_the_wait(
    h: Harness,
) -> None:
    queue = FakeTaskQueue()
    quota = ProviderQuotaExhausted("no room in this minute's quota", retry_after_s=30)
    service = h.service(quota, queue=queue)
    job_id = h.seed()
    claimed = h.snapshot_on(0, job_id)
    h.beats.finish_on = 0
    result = service.handle(TaskDelivery(job_id, "t", 0))
    job = h.job(job_id)
    assert result == DeliveryResult(Verdict.DEFERRED, job, 30, reason=quota)
    # Given back uncounted, not held for a budget: the next task carries it on.
    [attempt] = claimed
    assert attempt.lease_owner is not None
    assert job == attempt.defer(attempt.lease_owner, h.t0)
    assert job.status is JobStatus.RETRYING and job.attempts == 0 and job.deferrals == 1
    assert job.history[-1].outcome is AttemptOutcome.RELEASED and job.held_since is None
    assert job.task_name == task_name_for(job_id, 0, 1)
    assert queue.tasks == [TaskSpec(job.task_name, job_id, schedule_time=h.t0 + seconds(30))]
    assert h.publisher.events == []


@pytest.mark.parametrize(
    ("hint", "wait"), [(None, QUOTA_WAIT_S), (0.2, 1.0), (1.0, 1.0), (42.5, 42.5)]
)
def test_no_provider_quota_waits_for_its_hint_a_quota_window_without_one_a_second_at_least(
    h: Harness, hint: float | None, wait: float
) -> None:
    assert QUOTA_WAIT_S == 60.0
    queue = FakeTaskQueue()
    quota = ProviderQuotaExhausted("no room", retry_after_s=hint)
    service = h.service(quota, queue=queue)
    job_id = h.seed()
    h.beats.finish_on = 0
    result = service.handle(TaskDelivery(job_id, "t", 0))
    assert result == DeliveryResult(Verdict.DEFERRED, h.job(job_id), wait, reason=quota)
    [task] = queue.tasks
    assert task.schedule_time == h.t0 + seconds(wait)


def test_a_new_task_the_queue_cannot_take_leaves_the_job_deferred_and_answers_throttled(
    h: Harness,
) -> None:
    queue = FakeTaskQueue(available=False)
    quota = ProviderQuotaExhausted("no room", retry_after_s=30)
    service = h.service(quota, queue=queue)
    job_id = h.seed()
    h.beats.finish_on = 0
    result = service.handle(TaskDelivery(job_id, "t", 0))
    job = h.job(job_id)
    # The queue retries this task, which the job's next claim still accepts.
    assert result == DeliveryResult(Verdict.THROTTLED, job, 30, reason=quota)
    assert job.status is JobStatus.RETRYING and job.attempts == 0 and job.deferrals == 1
    assert queue.tasks == [] and h.publisher.events == []


# --- a duplicate delivery of a job waiting in a provider batch -------------------------


def _batches(h: Harness, service: WorkerService) -> BatchService:
    policy = BatchPolicy(lanes=frozenset({"bulk"}))
    store = cast(JobStore, h.store)
    batches = BatchService(
        store, FakeTaskQueue(), h.clock, ScriptedBatches(), policy, service.record_batch_answer
    )
    service.batches = batches
    return batches


def test_a_delivery_of_a_job_waiting_in_a_provider_batch_is_acknowledged_untouched(
    h: Harness,
) -> None:
    service = h.service()
    _batches(h, service)
    waiting = _waiting_in_batch(h, h.seed())
    result = service.handle(TaskDelivery(waiting.id, "t", 1))
    assert result == DeliveryResult(Verdict.DONE, None)
    assert h.time.sleeps == [] and h.job(waiting.id) == waiting and h.grader.calls == 0


def test_without_batch_mode_a_job_waiting_in_a_batch_is_a_lease_to_wait_for(
    h: Harness,
) -> None:
    service = h.service()
    waiting = _waiting_in_batch(h, h.seed())
    result = service.handle(TaskDelivery(waiting.id, "t", 1))
    assert h.time.sleeps == pytest.approx([1.5] * 8)  # the takeover wait is one lease
    assert result.verdict is Verdict.LOCKED and result.job == waiting
    assert h.grader.calls == 0


def test_in_batch_mode_a_live_lease_of_a_job_in_no_batch_is_waited_out_and_taken_over(
    h: Harness,
) -> None:
    service = h.service()
    _batches(h, service)
    job_id = h.seed()
    h.put(job_id, lambda j: j.claim("dead", h.t0 - seconds(LEASE - 1), seconds(LEASE)))
    h.beats.finish_on = 0
    result = service.handle(TaskDelivery(job_id, "t", 1))
    assert h.time.sleeps == pytest.approx([1.01])
    job = h.job(job_id)
    assert result == DeliveryResult(Verdict.DONE, job)
    assert job.status is JobStatus.SUCCEEDED and job.result == RESULT and job.attempts == 2
    assert h.grader.received == [GraderCall(REQUEST, 2, TIMEOUT)]


# --- one commit for the outcome and its event -------------------------------------------


def test_in_one_commit_a_graded_job_is_stored_announced_and_handed_to_on_final(
    h: Harness,
) -> None:
    finals: list[Job] = []
    service = h.service(uow=SqliteUnitOfWork(h.db), on_final=finals.append)
    job_id = h.seed()
    h.beats.finish_on = 0
    result = service.handle(TaskDelivery(job_id, "t", 0))
    job = h.job(job_id)
    assert result == DeliveryResult(Verdict.DONE, job)
    assert job.status is JobStatus.SUCCEEDED and job.result == RESULT and job.attempts == 1
    assert job.event_published and job.lease_owner is None
    [event] = h.publisher.events
    assert isinstance(event, GradingCompleted) and event.outcome == "succeeded"
    assert event.event_id == completion_event_id(job_id)
    # The assignment hears of the job as graded, before it was marked announced.
    [final] = finals
    assert final.id == job_id and final.status is JobStatus.SUCCEEDED
    assert final.result == RESULT and not final.event_published


# --- the provider refuses the grader's configuration ------------------------------------

REFUSED = "openai-compatible answered HTTP 401"


def test_a_refused_configuration_gives_the_job_back_uncounted_and_suspends_the_queue(
    h: Harness,
) -> None:
    queue = FakeTaskQueue()
    refused = GraderMisconfigured(REFUSED)
    # The queue's last delivery but one: the queue retries this task later.
    service = h.service(refused, queue=queue)
    job_id = h.seed()
    h.beats.finish_on = 0
    result = service.handle(TaskDelivery(job_id, "t", LAST_RETRY - 1))
    job = h.job(job_id)
    # Retry once the gate's first probe is due (30 s after the refusal).
    assert result == DeliveryResult(Verdict.SUSPENDED, job, 30.0, reason=refused)
    assert job.status is JobStatus.RETRYING and job.attempts == 0 and job.deferrals == 0
    assert job.error is None and job.lease_owner is None and job.lease_expires_at is None
    assert job.history[-1].outcome is AttemptOutcome.RELEASED
    assert service.gate.fault is refused
    assert queue.tasks == [] and h.publisher.events == []


def test_a_refused_configuration_on_the_queues_last_delivery_hands_the_job_to_a_new_task(
    h: Harness,
) -> None:
    queue = FakeTaskQueue()
    refused = GraderMisconfigured(REFUSED)
    service = h.service(refused, queue=queue)
    job_id = h.seed()
    h.beats.finish_on = 0
    result = service.handle(TaskDelivery(job_id, "t", LAST_RETRY))
    job = h.job(job_id)
    assert result == DeliveryResult(Verdict.DEFERRED, job, 30.0, reason=refused)
    assert job.status is JobStatus.RETRYING and job.attempts == 0 and job.deferrals == 1
    assert queue.tasks == [TaskSpec(job.task_name, job_id, schedule_time=h.t0 + seconds(30))]


def test_a_refused_configuration_on_the_last_delivery_without_a_queue_answers_suspended(
    h: Harness,
) -> None:
    refused = GraderMisconfigured(REFUSED)
    service = h.service(refused)
    job_id = h.seed()
    h.beats.finish_on = 0
    result = service.handle(TaskDelivery(job_id, "t", LAST_RETRY))
    job = h.job(job_id)
    # Only given back: the queue retries this task once grading resumes.
    assert result == DeliveryResult(Verdict.SUSPENDED, job, 30.0, reason=refused)
    assert job.status is JobStatus.RETRYING and job.attempts == 0 and job.deferrals == 0
    assert h.publisher.events == []
    # Grading now suspended: another job's last delivery is given back the same way,
    # without a grader call, on the refusal that suspended grading.
    other = h.seed("other")
    result = service.handle(TaskDelivery(other, "t", LAST_RETRY))
    assert result == DeliveryResult(Verdict.SUSPENDED, h.job(other), 30.0, reason=refused)
    assert h.grader.calls == 1


def test_a_queue_of_zero_max_attempts_may_drop_any_delivery_so_a_refusal_hands_the_job_on(
    h: Harness,
) -> None:
    grading = load_queues()["grading"].retry_config
    queue = FakeTaskQueue()
    refused = GraderMisconfigured(REFUSED)
    retry = dataclasses.replace(grading, max_attempts=0)
    service = h.service(refused, queue=queue, retry=retry)
    job_id = h.seed()
    h.beats.finish_on = 0
    result = service.handle(TaskDelivery(job_id, "t", 0))
    job = h.job(job_id)
    assert result == DeliveryResult(Verdict.DEFERRED, job, 30.0, reason=refused)
    assert job.attempts == 0 and job.deferrals == 1
    assert queue.tasks == [TaskSpec(job.task_name, job_id, schedule_time=h.t0 + seconds(30))]
