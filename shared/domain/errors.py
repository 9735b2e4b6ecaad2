"""The error tree: every Gradeq error carries its problem type and HTTP status once.

Handlers never choose a status code themselves; the one problem+json handler per app
renders these (see `shared.http.problems`).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from shared.domain.status import JobStatus

PROBLEM_BASE = "https://gradeq.dev/problems/"


class GradeqError(Exception):
    """Base of every error the services answer with a problem document."""

    slug: ClassVar[str] = "internal-error"
    title: ClassVar[str] = "Internal error"
    status: ClassVar[int] = 500

    def __init__(self, detail: str, **extensions: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        self.extensions = extensions

    @property
    def type_uri(self) -> str:
        return PROBLEM_BASE + self.slug


# --- request errors (intake) ---------------------------------------------------------


class ValidationFailed(GradeqError):
    slug = "validation-error"
    title = "The request body is invalid"
    status = 400


class IdempotencyConflict(GradeqError):
    slug = "idempotency-key-reused"
    title = "Idempotency-Key already used with a different request"
    status = 422


class NoValidAnswer(GradeqError):
    """A batch none of whose answers is valid (`items` names each one's problem)."""

    slug = "no-valid-answer"
    title = "No answer of the batch is valid"
    status = 422


class JobNotFound(GradeqError):
    slug = "job-not-found"
    title = "No such grading job"
    status = 404


class AssignmentNotFound(GradeqError):
    slug = "assignment-not-found"
    title = "No such assignment"
    status = 404


class AssignmentBusy(GradeqError):
    """A regrade asked for while the assignment's current round is still being graded."""

    slug = "assignment-busy"
    title = "The assignment's current round is still being graded"
    status = 409


class TooManyActiveJobs(GradeqError):
    """The client's ceiling on jobs not yet final is reached (`limit` names it)."""

    slug = "too-many-active-jobs"
    title = "Too many of this client's jobs are not yet final"
    status = 429

    def __init__(self, detail: str, retry_after_s: int, limit: int) -> None:
        super().__init__(detail, limit=limit)
        self.retry_after_s = retry_after_s


class BacklogFull(GradeqError):
    """The global ceiling on jobs not yet final is reached."""

    slug = "backlog-full"
    title = "The service's backlog is full"
    status = 503

    def __init__(self, detail: str, retry_after_s: int) -> None:
        super().__init__(detail)
        self.retry_after_s = retry_after_s


class BudgetExhausted(GradeqError):
    """A monthly budget of the client or of the assignment is spent (`budget` names it,
    with its hard limit and this month's spend); Retry-After points at the next month."""

    slug = "budget-exhausted"
    title = "The monthly grading budget is spent"
    status = 429

    def __init__(self, detail: str, retry_after_s: int, budget: dict[str, Any]) -> None:
        super().__init__(detail, budget=budget)
        self.retry_after_s = retry_after_s


class LaneNotAllowed(GradeqError):
    """The client asked for a lane it may not use (`lane` names it, `allowed` lists them)."""

    slug = "lane-not-allowed"
    title = "This client may not use the requested lane"
    status = 403


class LaneNotFound(GradeqError):
    """No lane of that name is declared in shared/config/queues.json."""

    slug = "lane-not-found"
    title = "No such lane"
    status = 404


# --- job state errors ----------------------------------------------------------------


class IllegalTransition(GradeqError):
    """A transition the state machine does not allow (a bug or a lost race)."""

    slug = "illegal-transition"
    title = "The job cannot make that transition"
    status = 409

    def __init__(self, job_id: str, current: JobStatus, target: JobStatus) -> None:
        super().__init__(f"job {job_id} cannot go from {current} to {target}")
        self.current = current
        self.target = target


class JobAlreadyFinal(GradeqError):
    slug = "job-already-final"
    title = "The job has already reached a final state"
    status = 409

    def __init__(self, job_id: str, status: JobStatus) -> None:
        super().__init__(f"job {job_id} is already {status}")
        self.job_status = status


class JobLocked(GradeqError):
    """Another attempt holds a live lease; the queue should try again later."""

    slug = "job-locked"
    title = "Another attempt is grading this job"
    status = 409

    def __init__(self, job_id: str, until: datetime) -> None:
        super().__init__(f"job {job_id} is leased until {until.isoformat()}")
        self.until = until


class LeaseLost(GradeqError):
    """This attempt no longer owns the job (its lease expired and was taken over)."""

    slug = "lease-lost"
    title = "This attempt no longer holds the job's lease"
    status = 409

    def __init__(self, job_id: str, owner: str) -> None:
        super().__init__(f"attempt {owner} no longer owns job {job_id}")


# --- infrastructure errors -----------------------------------------------------------


class DependencyUnavailable(GradeqError):
    """A store, queue or bus did not answer; safe to retry."""

    slug = "dependency-unavailable"
    title = "A dependency is unavailable"
    status = 503


# --- grading errors: retryable vs permanent is a type ---------------------------------


class GradingError(GradeqError):
    """A grader could not produce a result."""

    slug = "grading-error"
    title = "Grading failed"
    status = 502


class TransientGradingError(GradingError):
    """Worth another attempt later (rate limit, timeout, provider outage)."""

    slug = "grading-transient"

    def __init__(self, detail: str, retry_after_s: float | None = None) -> None:
        super().__init__(detail)
        self.retry_after_s = retry_after_s


class BudgetHeld(TransientGradingError):
    """The job's client or assignment has spent its monthly budget: nothing was sent, and
    the worker gives the job back uncounted, due again when the budget may allow it."""

    slug = "budget-held"


class GradingTimeout(TransientGradingError):
    slug = "grading-timeout"


class PermanentGradingError(GradingError):
    """No retry can help (the answer cannot be graded, the request is refused)."""

    slug = "grading-permanent"


# --- provider errors of the model graders (each a stable error.type on the job) -------


class ProviderRateLimited(TransientGradingError):
    """The provider answered 429; its Retry-After is passed on to the queue."""

    slug = "grading-rate-limited"


class ProviderUnavailable(TransientGradingError):
    """The provider answered 5xx, or could not be reached."""

    slug = "grading-provider-unavailable"


class MalformedModelAnswer(TransientGradingError):
    """The model's answer did not parse or contradicted the rubric, after bounded re-asks."""

    slug = "grading-malformed-answer"


class ProviderQuotaExhausted(TransientGradingError):
    """This instance's share of the provider quota has no room: nothing was sent.

    The worker gives the job back untouched and answers 429 with Retry-After, so the
    queue waits instead of a thread.
    """

    slug = "provider-quota-exhausted"
    title = "The grading provider's quota is exhausted for now"
    status = 429


class PromptTooLarge(PermanentGradingError):
    """The job's prompt is over its bound (its files' text, or its estimated input tokens).

    Checked before any request, so nothing is spent: the same job is over the bound on
    every attempt, so it fails at once.
    """

    slug = "grading-prompt-too-large"


class ModelAnswerTruncated(PermanentGradingError):
    """The model ran out of output tokens (finish reason MAX_TOKENS / length) before answering.

    Asking again with the same limit ends the same way at the same cost: the job fails
    with this type, and the operator raises GRADEQ_GRADER_MAX_OUTPUT_TOKENS or lowers the
    thinking budget (thinking tokens count against the same limit).
    """

    slug = "grading-answer-truncated"


class GraderMisconfigured(GradingError):
    """The provider refuses the grader's configuration itself: every job would fail alike.

    An unknown or retired model (404), a refused or revoked key (401/403), a disabled API,
    or a parameter the model does not take. Not the job's fault: the worker gives the job
    back uncounted and stops grading until a probe of the provider succeeds.
    """

    slug = "grader-misconfigured"
    title = "The grading provider refuses the grader's configuration"
    status = 503


class ProviderRejected(PermanentGradingError):
    """The provider refused the request itself (400, 401, 403, 404): no retry can help."""

    slug = "grading-provider-rejected"


class GradingRefused(PermanentGradingError):
    """The model declined to grade the answer (a safety block or refusal)."""

    slug = "grading-refused"
