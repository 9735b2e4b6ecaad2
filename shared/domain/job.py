"""The grading job and its one state machine.

Every status change in Gradeq goes through a method of `Job`; stores only persist the
result atomically (see `JobStore.update`). Methods return a new `Job` and never mutate.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from shared.domain.authorization import SERVER, Owner, owner_of
from shared.domain.errors import IllegalTransition, JobAlreadyFinal, JobLocked, LeaseLost
from shared.domain.grade import GradeResult
from shared.domain.ids import task_name_for
from shared.domain.review import RegradeRequest, Review, ReviewState, ReviewStatus
from shared.domain.status import JobStatus
from shared.domain.uploads import FileRef

#: How long the attempt that finalised a job keeps it to publish the completion event
#: before another delivery or the recovery sweep may announce it instead.
ANNOUNCE_LEASE = timedelta(seconds=60)

#: The error slug of a job failed because its attempt budget is spent.
ATTEMPTS_EXHAUSTED = "attempts-exhausted"


#: Who a regrade's replay record names.
REGRADE_BY = "regrade"

#: How many attempt records (and operator replays) a job keeps: the newest ones.
HISTORY_LIMIT = 20

#: The legal transitions. RUNNING -> RUNNING is the takeover of an expired lease;
#: FAILED -> PENDING is an operator's replay of a dead letter (`Job.replay_failed`);
#: SUCCEEDED or FAILED -> PENDING is also an assignment's regrade (`Job.regrade`).
TRANSITIONS: dict[JobStatus, frozenset[JobStatus]] = {
    JobStatus.PENDING: frozenset({JobStatus.RUNNING, JobStatus.CANCELLED, JobStatus.FAILED}),
    JobStatus.RETRYING: frozenset({JobStatus.RUNNING, JobStatus.CANCELLED, JobStatus.FAILED}),
    JobStatus.RUNNING: frozenset(
        {
            JobStatus.RUNNING,
            JobStatus.RETRYING,
            JobStatus.SUCCEEDED,
            JobStatus.FAILED,
            JobStatus.CANCELLED,
        }
    ),
    JobStatus.SUCCEEDED: frozenset({JobStatus.PENDING}),
    JobStatus.FAILED: frozenset({JobStatus.PENDING}),
    JobStatus.CANCELLED: frozenset(),
}


@dataclass(frozen=True)
class GradingRequest:
    """What the client asked to have graded."""

    submission_id: str
    answer: str
    rubric: str | tuple[str, ...]
    max_score: float = 10.0
    assignment_id: str | None = None
    callback_url: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    #: Not to be graded before this moment (RFC 3339, UTC); None: as soon as possible.
    not_before: str | None = None
    #: The lane the client asked for; None: its default lane.
    lane: str | None = None
    #: How long the client lets the grading take: "hours" allows a provider batch
    #: (docs/graders.md#batch-mode); None: as soon as possible.
    deadline: str | None = None
    #: Set when the rubric came from an assignment: its version, the assignment's prompt
    #: version and grading round (0: first grading, n: the n-th regrade).
    rubric_version: int | None = None
    prompt_version: str | None = None
    assignment_round: int = 0
    #: Uploaded files to grade, beside or instead of the text answer.
    files: tuple[FileRef, ...] = ()
    #: The client's own id of the student, by which all of a student's work is erased.
    student_id: str | None = None
    #: A student's practice job: graded, never sent to the school's webhook or gradebook.
    practice: bool = False
    #: The assignment posts grades when its teacher does (`Posting.MANUAL`).
    post_manually: bool = False

    @property
    def tallied(self) -> bool:
        """Whether the job counts in its assignment's progress (its rubric came from it)."""
        return self.assignment_id is not None and self.rubric_version is not None

    @property
    def scheduled_for(self) -> datetime | None:
        """`not_before` as a datetime."""
        return datetime.fromisoformat(self.not_before) if self.not_before else None

    def to_dict(self) -> dict[str, Any]:
        # Field by field: dataclasses.asdict walks every value, a cost paid on each write.
        data: dict[str, Any] = {
            "submission_id": self.submission_id,
            "answer": self.answer,
            "rubric": list(self.rubric) if isinstance(self.rubric, tuple) else self.rubric,
            "max_score": self.max_score,
            "assignment_id": self.assignment_id,
            "callback_url": self.callback_url,
            "metadata": copy.deepcopy(self.metadata),
        }
        if self.not_before is not None:  # the fingerprint of an unscheduled request is unchanged
            data["not_before"] = self.not_before
        if self.lane is not None:  # likewise for a request naming no lane
            data["lane"] = self.lane
        if self.deadline is not None:  # likewise for a request naming no deadline
            data["deadline"] = self.deadline
        if self.rubric_version is not None:  # likewise of a request without an assignment
            data["rubric_version"] = self.rubric_version
            data["prompt_version"] = self.prompt_version
            data["assignment_round"] = self.assignment_round
        if self.files:  # likewise for a request without files
            data["files"] = [f.to_dict() for f in self.files]
        if self.student_id is not None:  # likewise for a request without a student id
            data["student_id"] = self.student_id
        if self.practice:  # likewise for a job that is not practice
            data["practice"] = True
        if self.post_manually:  # likewise for a job posted automatically
            data["post_manually"] = True
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GradingRequest:
        rubric = data["rubric"]
        return cls(
            submission_id=data["submission_id"],
            answer=data["answer"],
            rubric=tuple(rubric) if isinstance(rubric, list) else rubric,
            max_score=float(data.get("max_score", 10.0)),
            assignment_id=data.get("assignment_id"),
            callback_url=data.get("callback_url"),
            metadata=dict(data.get("metadata") or {}),
            not_before=data.get("not_before"),
            lane=data.get("lane"),
            deadline=data.get("deadline"),
            rubric_version=data.get("rubric_version"),
            prompt_version=data.get("prompt_version"),
            assignment_round=int(data.get("assignment_round") or 0),
            files=tuple(FileRef.from_dict(f) for f in data.get("files") or ()),
            student_id=data.get("student_id"),
            practice=bool(data.get("practice", False)),
            post_manually=bool(data.get("post_manually", False)),
        )


#: The deadline of a request that may wait hours (a provider batch may grade it).
DEADLINE_HOURS = "hours"


@dataclass(frozen=True)
class ProviderBatchWait:
    """Where a job waits in a provider batch: gathered since `since`, then submitted.

    `batch_id` is None while the job is gathered for the next batch, the provider's batch
    id once it was submitted.
    """

    provider: str
    since: datetime
    batch_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"provider": self.provider, "since": _iso(self.since), "batch_id": self.batch_id}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProviderBatchWait:
        since = _parse(data["since"])
        assert since is not None
        return cls(provider=data["provider"], since=since, batch_id=data.get("batch_id"))


@dataclass(frozen=True)
class JobError:
    """Why an attempt or the whole job failed; `type` is a stable slug."""

    type: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"type": self.type, "message": self.message}


class AttemptOutcome(StrEnum):
    """How one attempt ended; RUNNING while it is still open."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    RETRY = "retry"
    FAILED = "failed"
    RELEASED = "released"  # given back before grading (no provider quota, shutdown)
    HELD = "held"  # given back before grading: its client's or assignment's budget is spent
    LEASE_EXPIRED = "lease-expired"  # its lease ran out: taken over or given up on
    CANCELLED = "cancelled"


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def _parse(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text is not None else None


@dataclass(frozen=True)
class AttemptRecord:
    """One attempt: who claimed it, when it started and ended, and how it ended."""

    number: int
    generation: int
    owner: str
    started_at: datetime
    ended_at: datetime | None = None
    outcome: AttemptOutcome = AttemptOutcome.RUNNING
    error: JobError | None = None

    def to_dict(self) -> dict[str, Any]:
        # Timestamps as ISO text: stores convert only the job's top-level datetimes.
        return {
            "number": self.number,
            "generation": self.generation,
            "owner": self.owner,
            "started_at": _iso(self.started_at),
            "ended_at": _iso(self.ended_at),
            "outcome": self.outcome.value,
            "error": self.error.to_dict() if self.error else None,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AttemptRecord:
        started_at = _parse(data["started_at"])
        assert started_at is not None
        error = data.get("error")
        return cls(
            number=int(data["number"]),
            generation=int(data["generation"]),
            owner=data["owner"],
            started_at=started_at,
            ended_at=_parse(data.get("ended_at")),
            outcome=AttemptOutcome(data["outcome"]),
            error=JobError(**error) if error else None,
        )


@dataclass(frozen=True)
class ReplayRecord:
    """An operator's replay of a failed job, or a regrade: who, when, the generation it
    started, why it had failed or what it had scored, and the attempts it had used."""

    at: datetime
    by: str
    generation: int
    error: JobError | None = None
    attempts: int = 0
    #: The result the regrade replaced, with the rubric version it was graded under.
    result: GradeResult | None = None
    rubric_version: int | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "at": _iso(self.at),
            "by": self.by,
            "generation": self.generation,
            "error": self.error.to_dict() if self.error else None,
            "attempts": self.attempts,
        }
        if self.result is not None:
            data["result"] = self.result.to_dict()
            data["rubric_version"] = self.rubric_version
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReplayRecord:
        at = _parse(data["at"])
        assert at is not None
        error = data.get("error")
        return cls(
            at=at,
            by=data["by"],
            generation=int(data["generation"]),
            error=JobError(**error) if error else None,
            attempts=int(data.get("attempts", 0)),
            result=GradeResult.from_dict(data["result"]) if data.get("result") else None,
            rubric_version=data.get("rubric_version"),
        )


class Posting(StrEnum):
    """How an assignment's grades reach students and downstream systems (as Canvas has it):
    each final grade as soon as it is final, or when the teacher posts them."""

    AUTOMATIC = "automatic"
    MANUAL = "manual"


def posting_of(settings: dict[str, Any]) -> Posting:
    """The posting policy kept in an assignment's settings (automatic when unset)."""
    return Posting(settings.get("posting") or Posting.AUTOMATIC.value)


@dataclass(frozen=True)
class PostedGrade:
    """The grade students and downstream systems see: one version of it, numbered from 1.

    A new version is posted only when the final grade changed (its score, source or
    feedback); each version is announced once by a `GradePosted` event.
    """

    version: int
    score: float
    max_score: float
    #: "teacher" where a teacher decided, else "model".
    source: str
    feedback: str
    at: datetime
    #: Who posted: "auto" (the assignment posts automatically) or the teacher.
    by: str
    #: The teacher's reason where the version is a teacher's decision.
    reason: str
    #: "PendingManual" while a teacher must still review the grade, else "FullyGraded".
    progress: str
    generation: int

    def same_grade(self, other: PostedGrade) -> bool:
        return (self.score, self.source, self.feedback) == (
            other.score,
            other.source,
            other.feedback,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "score": self.score,
            "max_score": self.max_score,
            "source": self.source,
            "feedback": self.feedback,
            "at": _iso(self.at),
            "by": self.by,
            "reason": self.reason,
            "progress": self.progress,
            "generation": self.generation,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PostedGrade:
        at = _parse(data["at"])
        assert at is not None
        return cls(
            version=int(data["version"]),
            score=float(data["score"]),
            max_score=float(data["max_score"]),
            source=data["source"],
            feedback=data.get("feedback") or "",
            at=at,
            by=data.get("by") or "",
            reason=data.get("reason") or "",
            progress=data.get("progress") or "FullyGraded",
            generation=int(data.get("generation") or 0),
        )


def _bounded(records: tuple[Any, ...]) -> tuple[Any, ...]:
    return records[-HISTORY_LIMIT:]


def _ms(start: datetime | None, end: datetime | None) -> int | None:
    if start is None or end is None:
        return None
    return max(0, round((end - start).total_seconds() * 1000))


@dataclass(frozen=True)
class Job:
    """A grading job. `id` is derived from the client's Idempotency-Key."""

    id: str
    client_id: str
    request: GradingRequest
    fingerprint: str
    status: JobStatus
    created_at: datetime
    updated_at: datetime
    attempts: int = 0
    generation: int = 0
    started_at: datetime | None = None
    attempt_started_at: datetime | None = None
    completed_at: datetime | None = None
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None
    result: GradeResult | None = None
    error: JobError | None = None
    event_published: bool = False
    # The newest attempts, oldest first, and the operator replays (both bounded).
    history: tuple[AttemptRecord, ...] = ()
    replays: tuple[ReplayRecord, ...] = ()
    # When the job last went (back) on the queue by an operator's replay; None: created_at.
    queued_at: datetime | None = None
    # Deliveries of this generation handed on to a later task (no provider quota).
    deferrals: int = 0
    # Set while the job's attempt waits in a provider batch (status RUNNING, the lease
    # held for the batch).
    provider_batch: ProviderBatchWait | None = None
    # A provider batch gave this generation back: it is graded one request at a time.
    batch_returned: bool = False
    # The lane (queue of shared/config/queues.json) the job's tasks go to; None: the
    # service's default queue (jobs stored before lanes existed).
    lane: str | None = None
    # Set when the grade was held for a teacher (see shared.domain.review).
    review: ReviewState | None = None
    # A student's request to look at the grade again, and its answer (once per grade).
    regrade_request: RegradeRequest | None = None
    # Who in the school (`client_id`) made the job: its server, or a signed-in user's id.
    author: str = SERVER
    # The grade students and downstream systems see (None: not posted), and whether its
    # GradePosted event reached the bus (False between the post's write and its event).
    posted: PostedGrade | None = None
    post_announced: bool = True

    @classmethod
    def new(
        cls,
        job_id: str,
        client_id: str,
        request: GradingRequest,
        fingerprint: str,
        now: datetime,
        lane: str | None = None,
        author: str = SERVER,
    ) -> Job:
        return cls(
            author=author,
            lane=lane,
            id=job_id,
            client_id=client_id,
            request=request,
            fingerprint=fingerprint,
            status=JobStatus.PENDING,
            created_at=now,
            updated_at=now,
        )

    # --- transitions -------------------------------------------------------------------

    def _to(self, status: JobStatus, now: datetime, **changes: Any) -> Job:
        if status not in TRANSITIONS[self.status]:
            raise IllegalTransition(self.id, self.status, status)
        return dataclasses.replace(self, status=status, updated_at=now, **changes)

    def lease_is_live(self, now: datetime) -> bool:
        """Whether an attempt holds the job (to grade it, or to announce its end)."""
        return self.lease_expires_at is not None and self.lease_expires_at > now

    def _finish(self, status: JobStatus, owner: str, now: datetime, **changes: Any) -> Job:
        # The finishing attempt keeps a short lease to publish the event undisturbed.
        return self._to(
            status,
            now,
            completed_at=now,
            lease_owner=owner,
            lease_expires_at=now + ANNOUNCE_LEASE,
            provider_batch=None,
            **changes,
        )

    def claim(self, owner: str, now: datetime, lease_for: timedelta) -> Job:
        """Start an attempt: take the lease, or refuse while another attempt holds it."""
        if self.status.is_final:
            raise JobAlreadyFinal(self.id, self.status)
        if self.lease_is_live(now) and self.lease_owner != owner:
            assert self.lease_expires_at is not None
            raise JobLocked(self.id, self.lease_expires_at)
        # A claim over an expired lease closes the dead attempt's record first.
        history = self._closed(now, AttemptOutcome.LEASE_EXPIRED)
        attempt = AttemptRecord(self.attempts + 1, self.generation, owner, now)
        return self._to(
            JobStatus.RUNNING,
            now,
            attempts=self.attempts + 1,
            started_at=self.started_at or now,
            attempt_started_at=now,
            lease_owner=owner,
            lease_expires_at=now + lease_for,
            history=_bounded((*history, attempt)),
            # A takeover of a batch's expired lease: the batch's answer is no longer taken.
            provider_batch=None,
        )

    def _closed(
        self, now: datetime, outcome: AttemptOutcome, error: JobError | None = None
    ) -> tuple[AttemptRecord, ...]:
        """The history with its open attempt (if any) ended now with `outcome`."""
        if not self.history or self.history[-1].ended_at is not None:
            return self.history
        last = dataclasses.replace(self.history[-1], ended_at=now, outcome=outcome, error=error)
        return (*self.history[:-1], last)

    def start_attempt(
        self, owner: str, now: datetime, lease_for: timedelta, max_attempts: int
    ) -> Job:
        """Claim the job for one more attempt, or fail it once its attempts are spent.

        `attempts` counts every claim across replays, and each grader call follows a
        claim, so a job never costs more than `max_attempts` grader calls. A claim over an
        expired lease (a takeover) counts too: the dead attempt may have called the grader.
        """
        if self.status.is_final:
            raise JobAlreadyFinal(self.id, self.status)
        if self.attempts >= max_attempts:
            error = JobError(
                ATTEMPTS_EXHAUSTED, f"all {max_attempts} attempts of the job were used"
            )
            return self.fail(None, error, now)
        return self.claim(owner, now, lease_for)

    def renew(self, owner: str, now: datetime, lease_for: timedelta) -> Job:
        """Extend the attempt's lease (the heartbeat); LeaseLost if it is no longer ours."""
        self._check_owner(owner)
        return dataclasses.replace(self, updated_at=now, lease_expires_at=now + lease_for)

    def _check_owner(self, owner: str) -> None:
        if self.status is not JobStatus.RUNNING or self.lease_owner != owner:
            raise LeaseLost(self.id, owner)

    def succeed(self, owner: str, result: GradeResult, now: datetime) -> Job:
        self._check_owner(owner)
        return self._finish(
            JobStatus.SUCCEEDED,
            owner,
            now,
            result=result,
            error=None,
            history=self._closed(now, AttemptOutcome.SUCCEEDED),
        )

    def release(
        self, owner: str, now: datetime, outcome: AttemptOutcome = AttemptOutcome.RELEASED
    ) -> Job:
        """Give back a claim whose attempt never started (no provider quota): uncounted.

        The job waits for the queue's next delivery as it did before the claim.
        """
        self._check_owner(owner)
        attempts = max(0, self.attempts - 1)
        return self._to(
            JobStatus.RETRYING,
            now,
            attempts=attempts,
            started_at=self.started_at if attempts else None,
            attempt_started_at=None,
            lease_owner=None,
            lease_expires_at=None,
            history=self._closed(now, outcome),
        )

    def defer(self, owner: str, now: datetime) -> Job:
        """Give back an uncounted claim (`release`) to a new task: `task_name` moves on.

        The delivery that defers creates the task named `task_name` (scheduled when the
        quota has room) before it is acknowledged, so a long quota outage spends neither
        the job's attempts nor the queue's attempts of any one task.
        """
        return dataclasses.replace(self.release(owner, now), deferrals=self.deferrals + 1)

    def hold_for_budget(self, owner: str, now: datetime) -> Job:
        """`defer` because the job's budget is spent: held, not failed, until a look finds
        the budget raised or the month over (`held_since`)."""
        held = self.release(owner, now, AttemptOutcome.HELD)
        return dataclasses.replace(held, deferrals=self.deferrals + 1)

    @property
    def held_since(self) -> datetime | None:
        """Since when the job is held by a spent budget: the first of the holds that ended
        its latest attempts, while it waits for the next look; None: not held."""
        if self.status is not JobStatus.RETRYING:
            return None
        since = None
        for record in reversed(self.history):
            if record.outcome is not AttemptOutcome.HELD:
                break
            since = record.ended_at
        return since

    def retry_later(self, owner: str, error: JobError, now: datetime) -> Job:
        self._check_owner(owner)
        return self._to(
            JobStatus.RETRYING,
            now,
            error=error,
            lease_owner=None,
            lease_expires_at=None,
            history=self._closed(now, AttemptOutcome.RETRY, error),
        )

    def fail(self, owner: str | None, error: JobError, now: datetime) -> Job:
        """Record a final failure; `owner=None` is the recovery sweep giving up on a job."""
        if owner is not None:
            self._check_owner(owner)
            history = self._closed(now, AttemptOutcome.FAILED, error)
        elif self.lease_is_live(now):
            assert self.lease_expires_at is not None
            raise JobLocked(self.id, self.lease_expires_at)
        else:
            # An attempt still open here is one whose lease ran out unanswered.
            history = self._closed(now, AttemptOutcome.LEASE_EXPIRED)
        return self._finish(
            JobStatus.FAILED, owner or "recovery", now, error=error, history=history
        )

    def cancel(self, now: datetime, reason: JobError | None = None) -> Job:
        """End the job unfinished; `reason` says why when it was not the client's call."""
        if self.status.is_final:
            raise JobAlreadyFinal(self.id, self.status)
        return self._finish(
            JobStatus.CANCELLED,
            "cancel",
            now,
            error=reason,
            history=self._closed(now, AttemptOutcome.CANCELLED, reason),
        )

    # --- provider batches (docs/graders.md#batch-mode) ---------------------------------

    def enter_batch(self, owner: str, provider: str, now: datetime, lease_for: timedelta) -> Job:
        """Hand the claimed attempt to the next provider batch; the lease waits for it.

        The job stays RUNNING under the attempt's lease (renewed by nobody): if no batch
        takes it before the lease runs out, the recovery sweep replays it.
        """
        self._check_owner(owner)
        if self.batch_returned:
            raise IllegalTransition(self.id, self.status, self.status)
        return dataclasses.replace(
            self,
            updated_at=now,
            lease_expires_at=now + lease_for,
            provider_batch=ProviderBatchWait(provider, now),
        )

    def _check_batch(self, batch_id: str | None) -> ProviderBatchWait:
        """The job's batch wait, if it waits in `batch_id` (None: gathered, unsubmitted)."""
        if self.status.is_final:
            raise JobAlreadyFinal(self.id, self.status)
        wait = self.provider_batch
        if self.status is not JobStatus.RUNNING or wait is None or wait.batch_id != batch_id:
            raise LeaseLost(self.id, f"batch {batch_id}")
        return wait

    def submit_batch(
        self, expected: str | None, batch_id: str, now: datetime, lease_for: timedelta
    ) -> Job:
        """Record that the job went into `batch_id`; it must still wait in `expected`.

        The gatherer first marks its jobs with a reservation (`expected` None), then with
        the provider's id: two gatherers never put one job into two batches.
        """
        wait = self._check_batch(expected)
        return dataclasses.replace(
            self,
            updated_at=now,
            lease_expires_at=now + lease_for,
            provider_batch=dataclasses.replace(wait, batch_id=batch_id, since=now),
        )

    def batch_succeeded(self, batch_id: str, result: GradeResult, now: datetime) -> Job:
        """The batch's answer for this job: SUCCEEDED, once (the job left the batch)."""
        self._check_batch(batch_id)
        assert self.lease_owner is not None
        return self.succeed(self.lease_owner, result, now)

    def leave_batch(self, batch_id: str | None, error: JobError, now: datetime) -> Job:
        """The batch gave no usable answer: RETRYING on a new task, graded one by one.

        The batch's attempt stays counted (the provider may have graded it). `deferrals`
        moves on so that the new task has a name of its own (the first one was deleted).
        """
        self._check_batch(batch_id)
        assert self.lease_owner is not None
        retrying = self.retry_later(self.lease_owner, error, now)
        return dataclasses.replace(
            retrying,
            provider_batch=None,
            batch_returned=True,
            deferrals=self.deferrals + 1,
        )

    @property
    def waits_in_batch(self) -> bool:
        """Whether the job's attempt waits in a provider batch (gathered or submitted)."""
        return self.status is JobStatus.RUNNING and self.provider_batch is not None

    def mark_event_published(self, now: datetime) -> Job:
        if not self.status.is_final:
            raise IllegalTransition(self.id, self.status, self.status)
        # The completion's announcement publishes the posted grade's event too.
        return dataclasses.replace(
            self,
            event_published=True,
            post_announced=True,
            updated_at=now,
            lease_owner=None,
            lease_expires_at=None,
        )

    def replay(self, now: datetime) -> Job:
        """Bump the generation so a fresh task name can be enqueued for a stuck job."""
        if self.status.is_final:
            raise JobAlreadyFinal(self.id, self.status)
        return dataclasses.replace(
            self,
            generation=self.generation + 1,
            deferrals=0,
            updated_at=now,
            provider_batch=None,
        )

    def replay_failed(self, now: datetime, by: str) -> Job:
        """An operator's replay of a dead letter: back to PENDING as a new generation.

        The attempt budget starts afresh (the operator decided the job deserves it); the
        attempt history is kept and the replay recorded with who and when. Refused while
        the failure's announce lease is live, so its event is published first.
        """
        if self.status is not JobStatus.FAILED:  # a success is regraded, never replayed
            raise IllegalTransition(self.id, self.status, JobStatus.PENDING)
        if self.lease_is_live(now):
            assert self.lease_expires_at is not None
            raise JobLocked(self.id, self.lease_expires_at)
        replay = ReplayRecord(now, by, self.generation + 1, self.error, self.attempts)
        return self._next_generation(now, replay)

    def regrade(
        self,
        now: datetime,
        request: GradingRequest,
        by: str = REGRADE_BY,
        lane: str | None = None,
        reopen: bool = False,
    ) -> Job:
        """Grade a final job again under `request` (a new rubric, prompt or round).

        Like an operator's replay, a new generation with its own attempt budget and its
        own event id; the result it replaces is kept in the replay record. `lane`: the
        lane the new generation is graded in (None: the job's own). A teacher's reviews
        stay on the job (the teacher's grade stays the final grade); `reopen` asks to put
        reviewed grades back in the teacher's queue once the new model grade is in. A
        student's open regrade request keeps its review state too (it stays in the queue).
        """
        if self.status not in (JobStatus.SUCCEEDED, JobStatus.FAILED):
            raise IllegalTransition(self.id, self.status, JobStatus.PENDING)
        if not self.event_published:
            # The generation's event goes out first, or its subscribers never hear of it.
            raise JobLocked(self.id, self.lease_expires_at or now)
        replay = ReplayRecord(
            now,
            by,
            self.generation + 1,
            self.error,
            self.attempts,
            self.result,
            self.request.rubric_version,
        )
        return self._next_generation(
            now,
            replay,
            request=request,
            result=None,
            review=self.review.carried(reopen) if self.review and self._review_carried else None,
            lane=self.lane if lane is None else lane,
        )

    @property
    def _review_carried(self) -> bool:
        """Whether a regrade keeps the review state: a teacher's reviews are on it, or a
        student's regrade request is open (it stays in the teacher's queue)."""
        if self.review is None:
            return False
        asked = self.regrade_request
        return bool(self.review.reviews) or (asked is not None and asked.is_open)

    def _next_generation(self, now: datetime, record: ReplayRecord, **changes: Any) -> Job:
        """PENDING again as a new generation: a fresh attempt budget, no lease, no outcome,
        its own event to publish; the generation before is kept in `record`."""
        return self._to(
            JobStatus.PENDING,
            now,
            generation=self.generation + 1,
            deferrals=0,
            attempts=0,
            started_at=None,
            attempt_started_at=None,
            completed_at=None,
            lease_owner=None,
            lease_expires_at=None,
            error=None,
            event_published=False,
            queued_at=now,
            replays=_bounded((*self.replays, record)),
            provider_batch=None,
            batch_returned=False,
            **changes,
        )

    def hold(self, state: ReviewState) -> Job:
        """Hold the finished grade for review (written with the success itself)."""
        if self.status is not JobStatus.SUCCEEDED:
            raise IllegalTransition(self.id, self.status, self.status)
        return dataclasses.replace(self, review=state)

    def record_review(self, review: Review, now: datetime) -> Job:
        """A reviewer's decision on the held grade; the model's result stays as it was."""
        if self.status is not JobStatus.SUCCEEDED or self.review is None:
            raise IllegalTransition(self.id, self.status, self.status)
        return dataclasses.replace(self, review=self.review.reviewed(review), updated_at=now)

    # --- posting -----------------------------------------------------------------------

    @property
    def postable(self) -> bool:
        """Whether the job's grade is one a student and downstream systems get posted: an
        assignment's (not practice), graded, and not withheld for a first review."""
        return (
            self.request.tallied
            and not self.request.practice
            and self.status is JobStatus.SUCCEEDED
            and self.effective_result is not None
            and not (self.review is not None and self.review.withheld)
        )

    def post(self, now: datetime, by: str) -> Job:
        """Post the final grade: a new version when it differs from the posted one (or
        none was posted), else the job as it is. A grade not `postable` stays unposted."""
        final = self.effective_result
        if not self.postable or final is None:
            return self
        latest = self.review.latest if self.review is not None else None
        pending = self.review is not None and self.review.status is ReviewStatus.HELD
        posted = PostedGrade(
            version=(self.posted.version if self.posted else 0) + 1,
            score=final.score,
            max_score=self.request.max_score,
            source=self.final_source,
            feedback=final.feedback,
            at=now,
            by=by,
            reason=latest.reason if latest is not None else "",
            progress="PendingManual" if pending else "FullyGraded",
            generation=self.generation,
        )
        if self.posted is not None and self.posted.same_grade(posted):
            return self
        return dataclasses.replace(self, posted=posted, post_announced=False, updated_at=now)

    def post_if_automatic(self, now: datetime) -> Job:
        """Post where the assignment posts automatically, or where a grade was posted
        before and a teacher changed it (each change after posting is its own version)."""
        if self.request.post_manually:
            return self
        return self.post(now, "auto")

    def mark_post_announced(self, version: int) -> Job:
        """The GradePosted event of `version` reached the bus (a later version still waits)."""
        if self.posted is None or self.posted.version != version:
            return self
        return dataclasses.replace(self, post_announced=True)

    @property
    def awaiting_post(self) -> bool:
        """Whether the student and the webhook wait for the teacher to post this grade."""
        return self.request.post_manually and (
            self.posted is None or self.posted.generation != self.generation
        )

    # --- derived views -----------------------------------------------------------------

    @property
    def effective_result(self) -> GradeResult | None:
        """The grade the student sees: the newest review's, else the model's."""
        latest = self.review.latest if self.review is not None else None
        return latest.result if latest is not None else self.result

    @property
    def teacher_result(self) -> GradeResult | None:
        """The teacher's grade: the newest review's (None: no teacher decided on it)."""
        latest = self.review.latest if self.review is not None else None
        return latest.result if latest is not None else None

    @property
    def final_source(self) -> str:
        """Whose grade the final grade is: "teacher" where a teacher decided, else "model"."""
        return "teacher" if self.teacher_result is not None else "model"

    def model_grades(self) -> list[tuple[int, int | None, GradeResult]]:
        """The model's grade of each generation kept: (generation, rubric version, grade),
        oldest first; the current generation's last once it is graded."""
        grades = [
            (record.generation - 1, record.rubric_version, record.result)
            for record in self.replays
            if record.by == REGRADE_BY and record.result is not None
        ]
        if self.result is not None:
            grades.append((self.generation, self.request.rubric_version, self.result))
        return grades

    @property
    def withheld(self) -> bool:
        """Whether the grade waits for a teacher before the student or webhook hears of it:
        a first review, or (posting manually) the teacher's post."""
        if self.review is not None and self.review.withheld:
            return True
        return self.status is JobStatus.SUCCEEDED and self.awaiting_post

    @property
    def regraded_from(self) -> ReplayRecord | None:
        """The record of the regrade that started this generation, if one did."""
        for record in reversed(self.replays):
            if record.by == REGRADE_BY:
                return record
        return None

    @property
    def replayed_generation(self) -> int:
        """The generation the last operator replay started (0: never replayed)."""
        return self.replays[-1].generation if self.replays else 0

    @property
    def task_name(self) -> str:
        """The name of the task that currently carries the job on the queue."""
        return task_name_for(self.id, self.generation, self.deferrals)

    @property
    def lifetime_attempts(self) -> int:
        """Attempts across the operator's replays (those the kept replay records know of)."""
        return self.attempts + sum(r.attempts for r in self.replays)

    @property
    def recovery_replays(self) -> int:
        """Replays by the recovery sweep since the job last went on the queue."""
        return self.generation - self.replayed_generation

    def timings(self) -> dict[str, int | None]:
        """Queue wait, processing and total time; a replayed job counts from its replay."""
        queued_at = self.queued_at or self.created_at
        return {
            "queue_wait_ms": _ms(queued_at, self.started_at),
            "processing_ms": _ms(self.attempt_started_at, self.completed_at)
            if self.status is JobStatus.SUCCEEDED
            else _ms(self.started_at, self.completed_at),
            "total_ms": _ms(queued_at, self.completed_at),
        }

    @property
    def owner(self) -> Owner:
        """The school the job belongs to and its author there."""
        return Owner(self.client_id, self.author)

    # --- persistence record ------------------------------------------------------------

    def to_record(self) -> dict[str, Any]:
        """Flatten to plain values (datetimes stay datetimes) for a store to persist."""
        return {
            "id": self.id,
            "client_id": self.client_id,
            "request": self.request.to_dict(),
            "fingerprint": self.fingerprint,
            "status": self.status.value,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "attempts": self.attempts,
            "generation": self.generation,
            "started_at": self.started_at,
            "attempt_started_at": self.attempt_started_at,
            "completed_at": self.completed_at,
            "lease_owner": self.lease_owner,
            "lease_expires_at": self.lease_expires_at,
            "result": self.result.to_dict() if self.result else None,
            "error": self.error.to_dict() if self.error else None,
            "event_published": self.event_published,
            "history": [a.to_dict() for a in self.history],
            "replays": [r.to_dict() for r in self.replays],
            "queued_at": self.queued_at,
            "deferrals": self.deferrals,
            "provider_batch": self.provider_batch.to_dict()
            if self.provider_batch is not None
            else None,
            "batch_returned": self.batch_returned,
            "lane": self.lane,
            "review": self.review.to_dict() if self.review is not None else None,
            "author": self.author,
            "posted": self.posted.to_dict() if self.posted is not None else None,
            "post_announced": self.post_announced,
            # Only on jobs with a request: the records of others keep their shape.
            **(
                {"regrade_request": self.regrade_request.to_dict()}
                if self.regrade_request is not None
                else {}
            ),
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Job:
        """Rebuild a job from `to_record` output (unknown keys are ignored)."""

        result = record.get("result")
        error = record.get("error")
        review = record.get("review")
        regrade_request = record.get("regrade_request")
        # A user's job stored before jobs had an author names the user in its client id.
        owner = owner_of(record["client_id"], record.get("author"))
        return cls(
            id=record["id"],
            client_id=owner.school,
            author=owner.author,
            request=GradingRequest.from_dict(record["request"]),
            fingerprint=record["fingerprint"],
            status=JobStatus(record["status"]),
            created_at=record["created_at"],
            updated_at=record["updated_at"],
            attempts=int(record.get("attempts", 0)),
            generation=int(record.get("generation", 0)),
            started_at=record.get("started_at"),
            attempt_started_at=record.get("attempt_started_at"),
            completed_at=record.get("completed_at"),
            lease_owner=record.get("lease_owner"),
            lease_expires_at=record.get("lease_expires_at"),
            result=GradeResult.from_dict(result) if result else None,
            error=JobError(**error) if error else None,
            event_published=bool(record.get("event_published", False)),
            # Records written before attempt histories existed have none.
            history=tuple(AttemptRecord.from_dict(a) for a in record.get("history") or ()),
            replays=tuple(ReplayRecord.from_dict(r) for r in record.get("replays") or ()),
            queued_at=record.get("queued_at"),
            deferrals=int(record.get("deferrals", 0)),
            provider_batch=ProviderBatchWait.from_dict(record["provider_batch"])
            if record.get("provider_batch")
            else None,
            batch_returned=bool(record.get("batch_returned", False)),
            lane=record.get("lane"),
            review=ReviewState.from_dict(review) if review else None,
            # Jobs stored before regrade requests existed have none.
            regrade_request=RegradeRequest.from_dict(regrade_request) if regrade_request else None,
            posted=PostedGrade.from_dict(record["posted"]) if record.get("posted") else None,
            post_announced=bool(record.get("post_announced", True)),
        )


#: The keys of `Job.to_record` whose values are datetimes (or None); a store that cannot
#: keep datetimes as they are converts these on write, and back before `Job.from_record`.
DATETIME_FIELDS: tuple[str, ...] = (
    "created_at",
    "updated_at",
    "started_at",
    "attempt_started_at",
    "completed_at",
    "lease_expires_at",
    "queued_at",
)
