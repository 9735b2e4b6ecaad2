"""Run one delivery of a grading task: claim, grade under a heartbeat lease, record, announce.

The worker answers 2xx only once the job's state is durably recorded (and, for a final
state, its event published); anything else makes the queue deliver the task again.

The lease is short (`Budget.lease_s`) and renewed while the grader runs, so a live lease
means a live attempt. A delivery that meets a lease waits for it: if the holder stops
renewing (it died), the delivery takes the job over as soon as the lease expires.
"""

from __future__ import annotations

import contextvars
import dataclasses
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from shared.config.budget import Budget
from shared.config.queues import RetryConfig
from shared.domain.errors import (
    BudgetHeld,
    DependencyUnavailable,
    GradeqError,
    GraderMisconfigured,
    GradingError,
    JobAlreadyFinal,
    JobLocked,
    JobNotFound,
    LeaseLost,
    PermanentGradingError,
    ProviderQuotaExhausted,
    ProviderRateLimited,
    TransientGradingError,
)
from shared.domain.grade import GradeResult
from shared.domain.job import Job, JobError
from shared.domain.lanes import lane_context
from shared.domain.review import (
    ReviewPolicy,
    ReviewState,
    after_regrade,
    hold_state,
    regrade_threshold,
    request_kept,
)
from shared.domain.status import JobStatus
from shared.logs import job_context
from shared.ports import Clock, EventPublisher, Grader, JobStore, TaskQueue, TaskSpec, UnitOfWork
from shared.service_layer.budgets import BudgetGate
from shared.service_layer.completion import announce, log_completion, publish_completion
from shared.service_layer.grader_gate import GraderGate
from shared.service_layer.heartbeat import WORKER_SHUTDOWN as WORKER_SHUTDOWN
from shared.service_layer.heartbeat import AttemptState, Heartbeat
from shared.service_layer.provider_batches import BatchService

log = logging.getLogger(__name__)

#: How long a job waits for quota when the provider's 429 gave no Retry-After: one of
#: the quota's windows (requests and tokens are granted per minute).
QUOTA_WAIT_S = 60.0


@dataclass(frozen=True)
class TaskDelivery:
    """One HTTP push of a task, as described by the X-CloudTasks-* headers.

    `retry_count` (X-CloudTasks-TaskRetryCount) counts every earlier attempt. The worker
    reads no X-CloudTasks-TaskExecutionCount: Cloud Tasks counts no 5xx answer in it, and
    the worker answers 5xx to be retried, so it stays 0 on every attempt of a job that
    keeps failing.
    """

    job_id: str
    task_name: str = ""
    retry_count: int = 0
    #: The queue (lane) that sent it (X-CloudTasks-QueueName); "" when unknown.
    queue: str = ""


class Verdict(StrEnum):
    """What the delivery comes to, for the queue (the worker's HTTP reply maps it)."""

    DONE = "done"  # the job is final and announced (or left to its live attempt): delete the task
    RETRY = "retry"  # the attempt failed transiently: deliver again after a backoff
    LOCKED = "locked"  # another attempt holds the job, or took it over: try again later
    DROPPED = "dropped"  # the task can never succeed (unknown job, bad body): delete it
    THROTTLED = "throttled"  # no provider quota: the job was given back; try again later
    DEFERRED = "deferred"  # no provider quota: a new task, due later, carries the job on
    SUSPENDED = "suspended"  # the provider refuses the grader's configuration: hold all work


@dataclass(frozen=True)
class DeliveryResult:
    """The verdict, the job as it now stands, and what the reply should say."""

    verdict: Verdict
    job: Job | None
    retry_after_s: float | None = None
    reason: GradeqError | None = None


#: The `event` of the line that gives a started attempt back uncounted (its `attempt` is
#: the one its "grading started" line named): nothing was graded or billed (no quota, a
#: 429, a configuration the provider refuses), and the next claim starts it again.
ATTEMPT_GIVEN_BACK = "attempt_given_back"


def _log_given_back(job: Job, reason: GradingError) -> None:
    """Take back, on the log, the "grading started" of `job`'s attempt just given back.

    Logged as soon as the give-back is stored, before anything else may fail or stop.
    """
    log.info(
        "attempt given back uncounted",
        extra={"event": ATTEMPT_GIVEN_BACK, "attempt": job.attempts, "reason": reason.slug},
    )


class _Released(Exception):
    """The worker is shutting down and handed the attempt back (`released`: the job)."""

    def __init__(self, released: Job | None) -> None:
        super().__init__("released")
        self.released = released


class _Superseded(Exception):
    """The delivered task was handed on to a later one (`Job.defer`), named `successor`."""

    def __init__(self, successor: str, lane: str | None) -> None:
        super().__init__(successor)
        self.successor = successor
        self.lane = lane


class _CallCount:
    """How many grader calls are running (a call that hangs stays counted)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.running = 0

    def add(self, n: int) -> None:
        with self._lock:
            self.running += n


class _GraderCall:
    """One grader call on a daemon thread of its own; sets `done` when it returns.

    The thread runs in a copy of the delivery's context (job id, trace and lane), and is
    a daemon: a grader that never returns keeps neither its delivery from answering nor
    a stopping process alive.
    """

    def __init__(
        self, call: Callable[[], GradeResult], done: threading.Event, count: _CallCount
    ) -> None:
        self._result: GradeResult | None = None
        self._error: BaseException | None = None
        context = contextvars.copy_context()

        def run() -> None:
            try:
                self._result = context.run(call)
            except BaseException as exc:  # handed to the delivery's thread by `outcome`
                self._error = exc
            finally:
                count.add(-1)
                done.set()

        count.add(1)
        threading.Thread(target=run, name="grader", daemon=True).start()

    def outcome(self) -> GradeResult:
        """The grader's result, or the error it raised; only once `done` is set."""
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result


def settled(current: Job, done: Job, policy: ReviewPolicy | None, now: datetime) -> Job:
    """A job just graded (`done`, from `current`) with its review state and, where its
    assignment posts automatically, its posted grade.

    A regrade of a grade a teacher decided keeps the teacher's grade final; the grade goes
    back to the teacher's queue when the new model grade moved past the threshold or the
    regrade reopened it (shared.domain.review.after_regrade). A student's open regrade
    request keeps the grade held with its request (shared.domain.review.request_kept).
    """
    assert done.result is not None
    state: ReviewState | None
    if current.teacher_result is not None and current.review is not None:
        threshold = regrade_threshold(policy, current.request.max_score)
        state = after_regrade(current.review, done.result, threshold, done.generation, now)
    else:
        state = hold_state(policy, done.id, done.generation, done.result, now)
    asked = current.regrade_request
    if asked is not None and asked.is_open and current.review is not None:
        # A student's open request stays in the teacher's queue, where it was.
        state = request_kept(state, current.review, done.generation)
    return (done.hold(state) if state is not None else done).post_if_automatic(now)


class WorkerService:
    """Grades jobs delivered by the task queue."""

    def __init__(
        self,
        store: JobStore,
        publisher: EventPublisher,
        grader: Grader,
        clock: Clock,
        retry: RetryConfig,
        budget: Budget,
        uow: UnitOfWork | None = None,
        queue: TaskQueue | None = None,
        probe: Callable[[], None] | None = None,
        lane_retries: Mapping[str, RetryConfig] | None = None,
        on_final: Callable[[Job], None] | None = None,
        review_policy: Callable[[Job], ReviewPolicy | None] | None = None,
        heartbeat: Heartbeat | None = None,
        budgets: BudgetGate | None = None,
    ) -> None:
        # Monthly budgets: a job whose budget is spent is held (deferred uncounted).
        self._budgets = budgets
        # Each lane's queue retries on its own config; `retry` is the default queue's.
        self._lane_retries = dict(lane_retries or {})
        self._uow = uow
        # Which review rules apply to a job (its assignment's, else its client's).
        self._review_policy = review_policy
        self._on_final = on_final
        # Where a delivery without provider quota hands its job on; None: answer 429.
        self._queue = queue
        self._store = store
        self._publisher = publisher
        self._grader = grader
        self._clock = clock
        self._retry = retry
        self._budget = budget
        self._lease = budget.lease
        # A waiting delivery re-reads the job this often (one store read each time).
        self._poll_s = min(2.0, max(0.05, budget.heartbeat_s / 3))
        # One timer renews every attempt in flight; each grader call runs on a thread of
        # its own while its delivery's thread waits for it or for the heartbeat.
        self.heartbeat = heartbeat or Heartbeat(store, clock, budget)
        self._calls = _CallCount()
        # Closed while the provider refuses the configuration; `probe` checks it again.
        self.gate = GraderGate(probe, clock.now)
        # Where work that may wait is gathered into provider batches; None: batch mode off.
        self.batches: BatchService | None = None

    # --- shutdown ------------------------------------------------------------------------

    def drain(self, grace_s: float) -> None:
        """Take no new attempt; attempts still grading after `grace_s` hand their job back."""
        if self.heartbeat.drain(grace_s):
            log.warning("draining: gradings in flight have %.1fs to finish", grace_s)

    @property
    def draining(self) -> bool:
        return self.heartbeat.draining

    @property
    def gradings_in_flight(self) -> int:
        """Grader calls not yet returned (a hung one stays counted)."""
        return self._calls.running

    # --- a delivery ----------------------------------------------------------------------

    def handle(self, delivery: TaskDelivery) -> DeliveryResult:
        """Process one delivery and say what the queue should do with the task."""
        with job_context(delivery.job_id):
            if self.draining:
                reason = DependencyUnavailable("the worker is shutting down")
                return DeliveryResult(Verdict.RETRY, None, retry_after_s=1, reason=reason)
            fault = self.gate.check()
            if fault is not None and not self._may_be_last(delivery):
                # Untouched: neither the job nor the store hears of this delivery.
                wait = self.gate.retry_after_s()
                return DeliveryResult(Verdict.SUSPENDED, None, retry_after_s=wait, reason=fault)
            try:
                return self._handle(delivery, fault)
            except JobLocked as exc:
                return DeliveryResult(Verdict.LOCKED, None, reason=exc)
            except LeaseLost as exc:
                log.warning("the attempt lost its lease; its outcome was refused")
                return DeliveryResult(Verdict.LOCKED, None, reason=exc)

    def _owner(self, delivery: TaskDelivery) -> str:
        return f"{delivery.task_name or 'direct'}/{delivery.retry_count}/{uuid.uuid4().hex[:8]}"

    def _start(self, job_id: str, owner: str, task_name: str = "") -> Job:
        budget = self._budget.job_max_attempts

        def start(job: Job) -> Job:
            if task_name and self._handed_on(job, task_name):
                raise _Superseded(job.task_name, job.lane)
            return job.start_attempt(owner, self._clock.now(), self._lease, budget)

        return self._store.update(job_id, start)

    def _handed_on(self, job: Job, task_name: str) -> bool:
        """Whether `task_name` is the task that deferred the job to its current one.

        A deferring delivery whose acknowledgement was lost is delivered again: the task
        it created carries the job, so this one must not start a second chain.
        """
        if job.deferrals == 0 or job.status.is_final or job.lease_is_live(self._clock.now()):
            return False
        return task_name == dataclasses.replace(job, deferrals=job.deferrals - 1).task_name

    def _claim(self, delivery: TaskDelivery, owner: str) -> Job:
        """Start the delivery's attempt; `_Superseded` if a queued successor carries the job.

        The queue is asked only outside the store's update (a transaction on Firestore).
        """
        try:
            return self._start(delivery.job_id, owner, delivery.task_name)
        except _Superseded as superseded:
            if self._queue is None or self._queue.exists(superseded.successor, superseded.lane):
                raise
        # The successor was never created (its delivery answered 429): this task goes on.
        return self._start(delivery.job_id, owner)

    def _may_be_last(self, delivery: TaskDelivery) -> bool:
        """Whether the queue may delete the task after this delivery (by its attempts)."""
        attempts = self._retry_of(delivery).max_attempts
        return attempts >= 0 and delivery.retry_count + 1 >= attempts

    def _handle(
        self, delivery: TaskDelivery, fault: GraderMisconfigured | None = None
    ) -> DeliveryResult:
        owner = self._owner(delivery)
        try:
            job = self._claim(delivery, owner)
        except _Superseded:
            log.info("the task was handed on to a later one; acknowledging it")
            return DeliveryResult(Verdict.DONE, None)
        except JobNotFound as exc:
            log.error("task names an unknown job; dropping it")
            return DeliveryResult(Verdict.DROPPED, None, reason=exc)
        except JobAlreadyFinal:
            return self._already_final(delivery.job_id)
        except JobLocked as exc:
            if self._waits_in_batch(delivery.job_id):
                # A duplicate of the delivery that handed the job to a batch: the tick
                # finishes it, or returns it to the queue on a task of its own.
                log.info("the job waits in a provider batch; acknowledging the delivery")
                return DeliveryResult(Verdict.DONE, None)
            waited = self._wait_for_lease(delivery, exc)
            if waited is not None:
                return waited
            try:
                job = self._start(delivery.job_id, owner)
            except JobAlreadyFinal:
                return self._already_final(delivery.job_id)
            log.warning("attempt taken over after its lease expired")

        if job.status is JobStatus.FAILED:
            log.error("job failed: attempts exhausted", extra={"event": "job_failed"})
            return DeliveryResult(Verdict.DONE, self._announce(job))
        if fault is not None:
            # The task's last delivery while grading is suspended: a new task carries
            # the job past the suspension, so the queue deleting this one loses nothing.
            wait = self.gate.retry_after_s()
            return self._hand_on(job, owner, fault, wait, fallback=Verdict.SUSPENDED)
        return self._attempt(job, owner, delivery)

    def _waits_in_batch(self, job_id: str) -> bool:
        if self.batches is None:
            return False
        job = self._store.get(job_id)
        return job is not None and job.waits_in_batch

    def record_batch_answer(self, job: Job, batch_id: str, result: GradeResult) -> Job:
        """Store a provider batch's answer as the job's success and announce it, once.

        The same outcome path as a graded delivery: review rules, one commit with the
        event where the backend allows. A job no longer waiting in `batch_id` refuses it.
        Its cost (at the batch price) is counted against the job's budgets first, once per
        job generation, as a grading's is: a second tick's answer is not counted again.
        """
        if self._budgets is not None:
            self._budgets.charge(job, result)
        policy = self._review_policy(job) if self._review_policy is not None else None

        def succeed(current: Job) -> Job:
            now = self._clock.now()
            return settled(current, current.batch_succeeded(batch_id, result, now), policy, now)

        return self._store_outcome(job.id, succeed, announce=True)

    def _attempt(self, job: Job, owner: str, delivery: TaskDelivery) -> DeliveryResult:
        held = self._budgets.hold(job) if self._budgets is not None else None
        if held is not None:
            # Nothing is sent: the job waits, uncounted, for the month or a raised budget.
            wait = held.retry_after_s or QUOTA_WAIT_S
            return self._hand_on(job, owner, held, wait, fallback=Verdict.THROTTLED)
        log.info("grading started", extra={"attempt": job.attempts, "owner": owner})
        if self.batches is not None and self.batches.accepts(job):
            # The attempt's grading is the batch's: the delivery is acknowledged now.
            return DeliveryResult(Verdict.DONE, self.batches.gather(job, owner))
        try:
            # The quota limiter and a lane's own model read the job's lane from the context.
            with lane_context(job.lane):
                result = self._grade(job, owner)
        except _Released as released:
            return DeliveryResult(Verdict.RETRY, released.released, retry_after_s=1)
        except PermanentGradingError as exc:
            return self._fail(job, owner, exc)
        except GraderMisconfigured as exc:
            return self._suspend(job, owner, delivery, exc)
        except (ProviderQuotaExhausted, ProviderRateLimited) as exc:
            # No quota: nothing was graded, whatever the job. 429 (and 503) slow the
            # whole queue down, which only a quota shared by every job calls for.
            return self._throttled(job, owner, exc)
        except TransientGradingError as exc:
            return self._transient(job, owner, delivery, exc, exc.retry_after_s)
        except (LeaseLost, JobLocked):
            raise
        except Exception as exc:
            log.exception("grader raised an unexpected error")
            wrapped = GradingError(f"unexpected grader error: {type(exc).__name__}")
            return self._transient(job, owner, delivery, wrapped, None)

        if self._budgets is not None:
            # Before the outcome is stored: a stored grade is never left uncounted.
            self._budgets.charge(job, result)
        policy = self._review_policy(job) if self._review_policy is not None else None

        def succeed(current: Job) -> Job:
            now = self._clock.now()
            return settled(current, current.succeed(owner, result, now), policy, now)

        done = self._store_outcome(job.id, succeed, announce=True)
        if done.review is not None:
            log.info(
                "grade held for review",
                extra={
                    "event": "grade_held",
                    "reasons": [r.value for r in done.review.reasons],
                    "release": done.review.release.value,
                },
            )
        return DeliveryResult(Verdict.DONE, done)

    # --- the heartbeat -------------------------------------------------------------------

    def _grade(self, job: Job, owner: str) -> GradeResult:
        """Call the grader on a thread of its own; this one waits while the heartbeat renews.

        The delivery answers as soon as its attempt settles: when the grader returns, or
        when the heartbeat found the lease lost (LeaseLost) or handed the job back at the
        end of a drain's grace (`_Released`), whatever the grader is still doing. What the
        heartbeat found decides over the grader's outcome.
        """
        attempt = self.heartbeat.begin(job.id, owner)
        call = _GraderCall(
            lambda: self._grader.grade(
                job.request, attempt=job.lifetime_attempts, timeout_s=self._budget.grader_timeout_s
            ),
            attempt.settled,
            self._calls,
        )
        attempt.settled.wait()
        state = self.heartbeat.end(attempt)
        if state is AttemptState.RELEASED:
            raise _Released(attempt.released)
        if state is AttemptState.LOST:
            assert attempt.lost is not None
            raise attempt.lost
        return call.outcome()

    # --- meeting another attempt's lease -------------------------------------------------

    def _wait_for_lease(self, delivery: TaskDelivery, locked: JobLocked) -> DeliveryResult | None:
        """Wait while the lease's holder may be dead; None means: the lease expired, claim.

        A holder that renews is alive: a delivery other than the queue's last answers
        LOCKED at once; the last one waits for the job to end, then leaves it to its
        holder (the sweep replays the job if that holder fails it later).
        """
        seen = locked.until
        last = self._is_last(delivery, None)
        patience = self._budget.last_delivery_wait_s if last else self._budget.takeover_wait_s
        give_up = time.monotonic() + patience
        while True:
            remaining = (seen - self._clock.now()).total_seconds()
            pause = min(self._poll_s, max(0.0, remaining) + 0.01, give_up - time.monotonic())
            if pause > 0:
                time.sleep(pause)
            job = self._store.get(delivery.job_id)
            if job is None:
                return DeliveryResult(Verdict.DROPPED, None, reason=JobNotFound(delivery.job_id))
            if job.status.is_final:
                return self._already_final(job.id)
            if not job.lease_is_live(self._clock.now()):
                return None
            assert job.lease_expires_at is not None
            renewed = job.lease_expires_at > seen
            if renewed and not last:
                return DeliveryResult(Verdict.LOCKED, job, reason=locked)
            seen = job.lease_expires_at
            if time.monotonic() >= give_up:
                if last:
                    log.warning("the queue's last delivery leaves the job to its live attempt")
                    return DeliveryResult(Verdict.DONE, job)
                return DeliveryResult(Verdict.LOCKED, job, reason=locked)

    # --- outcomes ------------------------------------------------------------------------

    def _already_final(self, job_id: str) -> DeliveryResult:
        job = self._store.get(job_id)
        assert job is not None
        log.info("job already final; delivery is a duplicate", extra={"status": job.status})
        if not job.event_published and job.lease_is_live(self._clock.now()):
            # The finishing attempt is publishing the event right now; if it dies, this
            # task's next delivery (or the recovery sweep) publishes it.
            assert job.lease_expires_at is not None
            raise JobLocked(job.id, job.lease_expires_at)
        return DeliveryResult(Verdict.DONE, self._announce(job))

    def _is_last(self, delivery: TaskDelivery, job: Job | None) -> bool:
        started = job.started_at if job is not None else None
        elapsed = self._clock.now() - started if started is not None else None
        return self._retry_of(delivery).is_last_attempt(delivery.retry_count, elapsed)

    def _retry_of(self, delivery: TaskDelivery) -> RetryConfig:
        """The retry config of the queue that made this delivery."""
        return self._lane_retries.get(delivery.queue, self._retry)

    def _transient(
        self,
        job: Job,
        owner: str,
        delivery: TaskDelivery,
        exc: GradingError,
        retry_after_s: float | None,
    ) -> DeliveryResult:
        if self._is_last(delivery, job) or job.attempts >= self._budget.job_max_attempts:
            log.warning("transient error on the final attempt", extra={"error": exc.detail})
            return self._fail(job, owner, exc)
        error = JobError(exc.slug, exc.detail)
        retrying = self._store_outcome(
            job.id, lambda j: j.retry_later(owner, error, self._clock.now())
        )
        log.warning(
            "attempt failed; the queue will retry",
            extra={"error": exc.detail, "attempt": retrying.attempts},
        )
        return DeliveryResult(Verdict.RETRY, retrying, retry_after_s)

    def _throttled(self, job: Job, owner: str, exc: TransientGradingError) -> DeliveryResult:
        """Give the claim back uncounted and hand the job to a task due when quota frees up.

        Every delivery the queue makes counts against its max_attempts, whatever the
        answer: retrying the task itself would let a long quota outage fail jobs never
        graded.
        """
        wait = exc.retry_after_s if exc.retry_after_s is not None else QUOTA_WAIT_S
        # Not sooner than a second: each deferral is one more task to create and deliver.
        return self._hand_on(
            job, owner, exc, max(1.0, wait), fallback=Verdict.THROTTLED, started=True
        )

    def _suspend(
        self, job: Job, owner: str, delivery: TaskDelivery, exc: GraderMisconfigured
    ) -> DeliveryResult:
        """The provider refused the configuration: close the gate, give the job back uncounted.

        The queue is answered 503 so that it backs off as a whole; on the task's last
        delivery the job is handed on to a new task instead.
        """
        self.gate.trip(exc)
        wait = self.gate.retry_after_s()
        if self._may_be_last(delivery):
            return self._hand_on(job, owner, exc, wait, fallback=Verdict.SUSPENDED, started=True)
        released = self._store.update(job.id, lambda j: j.release(owner, self._clock.now()))
        _log_given_back(job, exc)
        return DeliveryResult(Verdict.SUSPENDED, released, wait, reason=exc)

    def _hand_on(
        self,
        job: Job,
        owner: str,
        reason: GradingError,
        wait: float,
        *,
        fallback: Verdict,
        started: bool = False,
    ) -> DeliveryResult:
        """Defer the job, uncounted, to a new task due in `wait` seconds (`Job.defer`).

        The new task exists before this delivery is acknowledged. Without a queue, or if
        the task cannot be created, the claim is only given back and the answer is
        `fallback`: the queue retries this task. `started`: the claim's "grading started"
        was logged (the grader was called and nothing was graded): the log takes it back.
        """
        if self._queue is None:
            released = self._store.update(job.id, lambda j: j.release(owner, self._clock.now()))
            if started:
                _log_given_back(job, reason)
            log.info("job given back", extra={"retry_after_s": wait, "reason": reason.slug})
            return DeliveryResult(fallback, released, wait, reason=reason)
        held = isinstance(reason, BudgetHeld)
        deferred = self._store.update(
            job.id,
            lambda j: (j.hold_for_budget if held else j.defer)(owner, self._clock.now()),
        )
        if started:
            _log_given_back(job, reason)
        due = self._clock.now() + timedelta(seconds=wait)
        try:
            self._queue.enqueue(
                TaskSpec(deferred.task_name, deferred.id, schedule_time=due, queue=deferred.lane)
            )
        except DependencyUnavailable as unavailable:
            log.warning(
                "the job could not be deferred to a new task; the queue retries this one",
                extra={"retry_after_s": wait, "reason": unavailable.detail},
            )
            return DeliveryResult(fallback, deferred, wait, reason=reason)
        message = (
            "budget spent; job held in a new task"
            if held
            else "no provider quota; job deferred to a new task"
            if fallback is Verdict.THROTTLED
            else "grading suspended; job deferred to a new task"
        )
        log.info(message, extra={"retry_after_s": wait, "deferrals": deferred.deferrals})
        return DeliveryResult(Verdict.DEFERRED, deferred, wait, reason=reason)

    def _fail(self, job: Job, owner: str, exc: GradingError) -> DeliveryResult:
        error = JobError(exc.slug, exc.detail)
        failed = self._store_outcome(
            job.id, lambda j: j.fail(owner, error, self._clock.now()), announce=True
        )
        log.error("job failed", extra={"event": "job_failed", "error_type": exc.slug})
        return DeliveryResult(Verdict.DONE, failed)

    def _store_outcome(
        self, job_id: str, mutate: Callable[[Job], Job], *, announce: bool = False
    ) -> Job:
        """Store an attempt's outcome (and announce a final one), retrying a busy store.

        The outcome and its event commit together where the backend allows. The grading
        already happened: giving up at the first store error would make the queue pay for
        a second grader call. Once the outcome is stored, an error is not retried here
        (the next delivery announces a final job that is not yet announced).
        """
        give_up = time.monotonic() + self._budget.result_write_retry_s
        delay = 0.1
        one_commit = self._uow is not None and self._uow.commits_together
        while True:
            stored = False
            try:
                with self._atomic():
                    if announce and one_commit:
                        job = self._store_announced(job_id, mutate)
                        stored = True
                        return job
                    job = self._store.update(job_id, mutate)
                    stored = True
                    return self._announce(job) if announce else job
            except DependencyUnavailable as exc:
                if stored or time.monotonic() + delay > give_up:
                    raise
                log.warning("storing the outcome failed; retrying", extra={"reason": exc.detail})
                time.sleep(delay)
                delay = min(delay * 2, 2.0)

    def _store_announced(self, job_id: str, mutate: Callable[[Job], Job]) -> Job:
        """Store a final outcome marked announced and publish its event, in one commit.

        Only where the unit of work makes the block one commit: publishing, then marking
        in a second write of the job, would change nothing a reader can see, since either
        both commit or neither does.
        """
        outcome: list[Job] = []
        marked_at = self._clock.now()

        def finish(current: Job) -> Job:
            done = mutate(current)
            outcome.append(done)
            return done.mark_event_published(marked_at) if done.status.is_final else done

        marked = self._store.update(job_id, finish)
        done = outcome[-1]
        if done.status.is_final:
            announced = publish_completion(done, self._publisher, self._on_final)
            log_completion(done, **announced)
        return marked

    def _atomic(self) -> AbstractContextManager[None]:
        return self._uow.atomic() if self._uow is not None else nullcontext()

    def _announce(self, job: Job) -> Job:
        return announce(job, self._store, self._publisher, self._clock, self._on_final)
