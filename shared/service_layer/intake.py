"""Accept grading requests idempotently and answer where to poll."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta

from shared.domain.admission import AdmissionLimits
from shared.domain.authorization import Action, Principal, as_principal, authorize
from shared.domain.errors import (
    BudgetExhausted,
    IdempotencyConflict,
    JobNotFound,
    ValidationFailed,
)
from shared.domain.ids import job_id_for, task_name_for
from shared.domain.job import GradingRequest, Job
from shared.domain.lanes import LanePolicy
from shared.domain.status import JobStatus
from shared.logs import job_context
from shared.ports import (
    Clock,
    EventPublisher,
    JobQuery,
    JobStore,
    TaskQueue,
    TaskSpec,
    UnitOfWork,
)
from shared.service_layer.budgets import BudgetGate
from shared.service_layer.completion import announce

log = logging.getLogger(__name__)

#: How far ahead a job may be scheduled: Cloud Tasks' limit for a task's schedule_time.
MAX_SCHEDULE_AHEAD = timedelta(days=30)


def fingerprint(request: GradingRequest) -> str:
    """Hash the request canonically, to tell a retry from a different reuse of a key."""
    canonical = json.dumps(request.to_dict(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def encode_cursor(job: Job) -> str:
    """An opaque cursor naming where a page ended."""
    raw = json.dumps([job.created_at.isoformat(), job.id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    """The (created_at, id) a cursor names; ValidationFailed when it is not one of ours."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created_at, job_id = json.loads(raw)
        moment = datetime.fromisoformat(created_at)
        if moment.tzinfo is None or not isinstance(job_id, str):
            raise ValueError("not a cursor")
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError) as exc:
        raise ValidationFailed(
            "the cursor is not one this API returned",
            errors=[{"field": "cursor", "message": "invalid cursor"}],
        ) from exc
    return moment, job_id


@dataclass(frozen=True)
class Page:
    """One page of a client's jobs, and the cursor of the next (None on the last)."""

    jobs: list[Job]
    next_cursor: str | None


@dataclass(frozen=True)
class Submission:
    """The job a request maps to, and whether this request created it."""

    job: Job
    created: bool


class IntakeService:
    """Submit, read and cancel grading jobs for one authenticated client."""

    def __init__(
        self,
        store: JobStore,
        queue: TaskQueue,
        publisher: EventPublisher,
        clock: Clock,
        limits: AdmissionLimits | None = None,
        fair_spacing: timedelta = timedelta(0),
        uow: UnitOfWork | None = None,
        lanes: LanePolicy | None = None,
        on_final: Callable[[Job], None] | None = None,
        budgets: BudgetGate | None = None,
    ) -> None:
        # Monthly budgets: past a hard limit a new job is refused (BudgetExhausted).
        self._budgets = budgets
        # None: every job goes to the queue's default lane (the request's lane is kept).
        self._lanes = lanes
        self._on_final = on_final
        self._limits = limits
        self._uow = uow
        self._fair_spacing = fair_spacing
        self._store = store
        self._queue = queue
        self._publisher = publisher
        self._clock = clock

    def submit(
        self, caller: Principal | str, idempotency_key: str, request: GradingRequest
    ) -> Submission:
        """Store the job once per key (of its author), then make sure its task exists.

        The caller's right to send this request (its own rubric, or practice) is checked
        before: the job belongs to the caller's school and names the caller its author.
        """
        principal = as_principal(caller)
        owner = principal.owner
        job_id = job_id_for(principal.key_space, idempotency_key)
        with job_context(job_id):
            now = self._clock.now()
            scheduled = request.scheduled_for
            if scheduled is not None and scheduled > now + MAX_SCHEDULE_AHEAD:
                raise ValidationFailed(
                    f"not_before may be at most {MAX_SCHEDULE_AHEAD.days} days ahead",
                    errors=[{"field": "not_before", "message": "too far ahead"}],
                )
            # The school's lanes, whoever in it submits.
            lane = self._lanes.resolve(owner.school, request.lane) if self._lanes else request.lane
            if self._budgets is not None:
                try:
                    self._budgets.admit(owner.school, request.assignment_id)
                except BudgetExhausted:
                    # A retried request of a job accepted before is answered with it.
                    known = self._store.get(job_id)
                    if known is None or known.client_id != owner.school:
                        raise
                    if known.fingerprint != fingerprint(request):
                        raise IdempotencyConflict(
                            "this Idempotency-Key was already used with a different request body"
                        ) from None
                    return Submission(known, False)
            digest = fingerprint(request)
            new = Job.new(
                job_id, owner.school, request, digest, now, lane=lane, author=owner.author
            )
            # The job and its task commit together where the backend allows: nothing is
            # half-written. Elsewhere a job may be stored without its task; its client's
            # retry (same key) or the recovery sweep creates the task.
            with self._uow.atomic() if self._uow else nullcontext():
                job, created = self._create(new, digest, now)
            log.info("job accepted" if created else "job request replayed")
            return Submission(job, created)

    def _create(self, new: Job, digest: str, now: datetime) -> tuple[Job, bool]:
        """Store the job unless its key was used, and make sure a pending job has its task."""
        # Fairness: the client's n-th job not yet final is due n spacings from now,
        # so another client's first job is never queued behind this client's burst.
        # A lane above the default one is not spaced: a live exam's jobs never queue
        # behind their client's backlog in the lower lanes.
        spaced = self._fair_spacing and not (self._lanes and self._lanes.urgent(new.lane))
        # Past a ceiling the store refuses a new job (TooManyActiveJobs, BacklogFull).
        if spaced:
            # The count comes with the create: the one the client's ceiling is checked on.
            admission = self._store.admit(new, self._limits)
            job, created, ahead = admission.job, admission.created, admission.ahead
        else:
            (job, created), ahead = self._store.create(new, self._limits), 0
        if not created and job.fingerprint != digest:
            raise IdempotencyConflict(
                "this Idempotency-Key was already used with a different request body"
            )
        if job.status is JobStatus.PENDING:
            # Also on a retried request: the first one may have died before enqueueing.
            # The task name is derived from the job, so the queue dedupes it.
            # A scheduled job's task waits in the queue until not_before. The time is
            # always given, so the queue orders every task on this service's clock.
            due = max(job.request.scheduled_for or now, now + ahead * self._fair_spacing)
            self._queue.enqueue(
                TaskSpec(
                    task_name_for(job.id, job.generation), job.id, schedule_time=due, queue=job.lane
                )
            )
        return job, created

    def get(self, caller: Principal | str, job_id: str, action: Action = Action.JOB_READ) -> Job:
        """The job, if the policy lets the caller `action` it; a job it may not read is as
        unknown as a missing one (another school's always)."""
        principal = as_principal(caller)
        job = self._store.get(job_id)
        authorize(
            principal,
            action,
            job.owner if job else None,
            lambda _: JobNotFound(f"no grading job {job_id}"),
            Action.JOB_READ,
        )
        assert job is not None
        return job

    def list(
        self,
        caller: Principal | str,
        limit: int,
        status: JobStatus | None = None,
        submission_id: str | None = None,
        cursor: str | None = None,
    ) -> Page:
        """The jobs the caller sees, newest first, `limit` at a time: the whole school's
        for its staff, one's own for a student (or staff narrowing to their own)."""
        principal = as_principal(caller)
        after = decode_cursor(cursor) if cursor else None
        author = None if principal.sees_school else principal.author
        # One more than asked tells whether another page exists.
        query = JobQuery(principal.school, limit + 1, status, submission_id, after, author)
        jobs = self._store.list_jobs(query)
        more = len(jobs) > limit
        jobs = jobs[:limit]
        return Page(jobs, encode_cursor(jobs[-1]) if more else None)

    def cancel(self, caller: Principal | str, job_id: str) -> Job:
        """Cancel a job that has not finished; announce it like any final state.

        A repeated cancel (a client's retry, or two racing) answers the cancelled job as
        the first did; a job that ended otherwise is refused as already final.
        """
        job = self.get(as_principal(caller), job_id, Action.JOB_CANCEL)
        with job_context(job_id):
            if job.status is not JobStatus.CANCELLED:
                now = self._clock.now()
                # A racing cancel may have got there first: its job is left as it is.
                job = self._store.update(
                    job_id, lambda j: j if j.status is JobStatus.CANCELLED else j.cancel(now)
                )
                log.info("job cancelled")
            return announce(job, self._store, self._publisher, self._clock, self._on_final)
