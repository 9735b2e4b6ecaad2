"""Run one delivery of a grading task: claim, grade, record, announce.

The worker answers 2xx only once the job's state is durably recorded (and, for a final
state, its event published); anything else makes the queue deliver the task again.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

from shared.config.queues import RetryConfig
from shared.domain.errors import (
    GradeqError,
    GradingError,
    JobAlreadyFinal,
    JobLocked,
    JobNotFound,
    LeaseLost,
    PermanentGradingError,
    ProviderQuotaExhausted,
    TransientGradingError,
)
from shared.domain.job import Job, JobError
from shared.logs import job_context
from shared.ports import Clock, EventPublisher, Grader, JobStore
from shared.service_layer.completion import announce

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TaskDelivery:
    """One HTTP push of a task, as described by the X-CloudTasks-* headers."""

    job_id: str
    task_name: str = ""
    retry_count: int = 0
    execution_count: int = 0


class Verdict(StrEnum):
    """What the delivery comes to, for the queue (the worker's HTTP reply maps it)."""

    DONE = "done"  # the job is final and announced: delete the task
    RETRY = "retry"  # the attempt failed transiently: deliver again after a backoff
    LOCKED = "locked"  # another attempt holds the job, or took it over: try again later
    DROPPED = "dropped"  # the task can never succeed (unknown job, bad body): delete it
    THROTTLED = "throttled"  # no provider quota: the job was given back; try again later


@dataclass(frozen=True)
class DeliveryResult:
    """The verdict, the job as it now stands, and what the reply should say."""

    verdict: Verdict
    job: Job | None
    retry_after_s: float | None = None
    reason: GradeqError | None = None


class WorkerService:
    """Grades jobs delivered by the task queue."""

    def __init__(
        self,
        store: JobStore,
        publisher: EventPublisher,
        grader: Grader,
        clock: Clock,
        retry: RetryConfig,
        grader_timeout_s: float,
        lease_margin_s: float,
    ) -> None:
        self._store = store
        self._publisher = publisher
        self._grader = grader
        self._clock = clock
        self._retry = retry
        self._timeout_s = grader_timeout_s
        # The lease outlives the longest possible grading, so a live lease means a live
        # attempt and an expired one means the attempt died.
        self._lease = timedelta(seconds=grader_timeout_s + lease_margin_s)

    def handle(self, delivery: TaskDelivery) -> DeliveryResult:
        """Process one delivery and say what the queue should do with the task."""
        with job_context(delivery.job_id):
            try:
                return self._handle(delivery)
            except JobLocked as exc:
                return DeliveryResult(Verdict.LOCKED, None, reason=exc)
            except LeaseLost as exc:
                log.warning("the attempt lost its lease; its outcome was refused")
                return DeliveryResult(Verdict.LOCKED, None, reason=exc)

    def _handle(self, delivery: TaskDelivery) -> DeliveryResult:
        owner = f"{delivery.task_name or 'direct'}/{delivery.retry_count}/{uuid.uuid4().hex[:8]}"
        try:
            job = self._store.update(
                delivery.job_id, lambda j: j.claim(owner, self._clock.now(), self._lease)
            )
        except JobNotFound as exc:
            log.error("task names an unknown job; dropping it")
            return DeliveryResult(Verdict.DROPPED, None, reason=exc)
        except JobAlreadyFinal:
            return self._already_final(delivery.job_id)

        log.info("grading started", extra={"attempt": job.attempts, "owner": owner})
        try:
            result = self._grader.grade(
                job.request, attempt=job.attempts, timeout_s=self._timeout_s
            )
        except PermanentGradingError as exc:
            return self._fail(job, owner, exc)
        except ProviderQuotaExhausted as exc:
            return self._throttled(job, owner, exc)
        except TransientGradingError as exc:
            return self._transient(job, owner, delivery, exc, exc.retry_after_s)
        except Exception as exc:
            log.exception("grader raised an unexpected error")
            wrapped = GradingError(f"unexpected grader error: {type(exc).__name__}")
            return self._transient(job, owner, delivery, wrapped, None)

        done = self._store.update(job.id, lambda j: j.succeed(owner, result, self._clock.now()))
        log.info("job succeeded", extra={"score": result.score, "attempt": done.attempts})
        return DeliveryResult(Verdict.DONE, self._announce(done))

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

    def _transient(
        self,
        job: Job,
        owner: str,
        delivery: TaskDelivery,
        exc: GradingError,
        retry_after_s: float | None,
    ) -> DeliveryResult:
        elapsed = self._clock.now() - (job.started_at or self._clock.now())
        if self._retry.is_last_attempt(delivery.retry_count, elapsed):
            log.warning("transient error on the final attempt", extra={"error": exc.detail})
            return self._fail(job, owner, exc)
        error = JobError(exc.slug, exc.detail)
        retrying = self._store.update(
            job.id, lambda j: j.retry_later(owner, error, self._clock.now())
        )
        log.warning(
            "attempt failed; the queue will retry",
            extra={"error": exc.detail, "attempt": retrying.attempts},
        )
        return DeliveryResult(Verdict.RETRY, retrying, retry_after_s)

    def _throttled(self, job: Job, owner: str, exc: ProviderQuotaExhausted) -> DeliveryResult:
        # Nothing reached the provider: the claim is given back without counting an
        # attempt, and the queue (not a thread) waits for the quota to have room.
        released = self._store.update(job.id, lambda j: j.release(owner, self._clock.now()))
        log.info("no provider quota; job given back", extra={"retry_after_s": exc.retry_after_s})
        return DeliveryResult(Verdict.THROTTLED, released, exc.retry_after_s, reason=exc)

    def _fail(self, job: Job, owner: str, exc: GradingError) -> DeliveryResult:
        error = JobError(exc.slug, exc.detail)
        failed = self._store.update(job.id, lambda j: j.fail(owner, error, self._clock.now()))
        log.error("job failed", extra={"event": "job_failed", "error_type": exc.slug})
        return DeliveryResult(Verdict.DONE, self._announce(failed))

    def _announce(self, job: Job) -> Job:
        return announce(job, self._store, self._publisher, self._clock)
