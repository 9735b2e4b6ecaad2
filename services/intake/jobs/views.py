"""The public JSON shapes the intake answers with, as pydantic models.

The same models render every answer and generate the OpenAPI document
(`services.intake.openapi`), so the document cannot drift from what is served.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from shared.domain.job import Job
from shared.domain.status import JobStatus


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat().replace("+00:00", "Z") if moment else None


class Timings(BaseModel):
    """Milliseconds spent waiting, grading, and in all (null until known)."""

    queue_wait_ms: int | None
    processing_ms: int | None
    total_ms: int | None


class Result(BaseModel):
    """A finished grading: by which grader, model and prompt, at what token cost."""

    model_config = ConfigDict(extra="forbid")

    score: float
    max_score: float
    feedback: str
    criteria: list[dict[str, Any]]
    grader: str
    model: str = ""
    prompt_version: str = ""
    usage: dict[str, int] = Field(default_factory=dict)
    confidence: float | None = None
    format_retries: int = 0


class ReviewSummary(BaseModel):
    """Whether the grade was held for a teacher's review, and whether it was reviewed."""

    status: str
    reviewed_at: str | None = None
    decision: str | None = None


class JobErrorView(BaseModel):
    """Why the last attempt or the whole job failed; `type` is a stable slug."""

    type: str
    message: str


class FileView(BaseModel):
    """An uploaded file the job grades (as checked at submit)."""

    upload_id: str
    name: str
    content_type: str
    size: int


class BatchWaitView(BaseModel):
    """Where a RUNNING job waits in a provider batch."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["provider-batch"] = "provider-batch"
    provider: str
    batch_id: str | None = Field(description="the provider's batch id; null while gathered")
    since: str


class BudgetHoldView(BaseModel):
    """Where a RETRYING job waits for its client's or assignment's budget (docs/cost.md#budgets)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["budget-hold"] = "budget-hold"
    since: str = Field(description="when a delivery first found the budget spent")


class RegradeRequestView(BaseModel):
    """A student's regrade request (docs/review.md) and the teacher's answer (null while
    open)."""

    by: str
    at: str
    reason: str
    answer: str | None
    answered_by: str | None
    answered_at: str | None
    answer_reason: str


def regrade_request_view(job: Job) -> RegradeRequestView | None:
    asked = job.regrade_request
    if asked is None:
        return None
    return RegradeRequestView(
        by=asked.by,
        at=_iso(asked.at) or "",
        reason=asked.reason,
        answer=asked.answer.value if asked.answer is not None else None,
        answered_by=asked.answered_by,
        answered_at=_iso(asked.answered_at),
        answer_reason=asked.answer_reason,
    )


class JobView(BaseModel):
    """A grading job as its client sees it."""

    model_config = ConfigDict(extra="forbid")

    id: str
    status: JobStatus
    submission_id: str
    assignment_id: str | None
    student_id: str | None = None
    author: str = Field(
        default="server",
        description="Who in the school submitted the job: server, or a signed-in user's id.",
    )
    practice: bool = Field(
        default=False,
        description="A student's practice job: never sent to the school's webhook.",
    )
    attempts: int = Field(ge=0)
    created_at: str
    started_at: str | None
    completed_at: str | None
    last_updated_at: str
    not_before: str | None = None
    lane: str | None = Field(
        default=None, description="The priority lane the job goes through (docs/lanes.md)."
    )
    deadline: str | None = Field(
        default=None, description='"hours" when the client lets a provider batch grade it.'
    )
    waiting: BatchWaitView | BudgetHoldView | None = Field(
        default=None,
        discriminator="kind",
        description=(
            "Set while the job (RUNNING) waits in a provider batch: gathered for the next "
            "batch, or submitted to the provider's batch `batch_id` (docs/graders.md#batch-mode); "
            "or while it (RETRYING) is held because its budget is spent (docs/cost.md#budgets)."
        ),
    )
    timings: Timings
    files: list[FileView] | None = None
    result: Result | None = None
    error: JobErrorView | None = None
    review: ReviewSummary | None = None
    regrade_request: RegradeRequestView | None = None


class JobPage(BaseModel):
    """One page of a client's jobs, newest first; `next_cursor` fetches the next."""

    jobs: list[JobView]
    next_cursor: str | None


class FieldError(BaseModel):
    """One invalid field of a request body ("" is the body itself)."""

    field: str
    message: str


class Problem(BaseModel):
    """An RFC 9457 problem document; `type` is stable, `detail` is for humans."""

    model_config = ConfigDict(extra="allow")

    type: str
    title: str
    status: int
    detail: str
    errors: list[FieldError] | None = None
    limit: int | None = None


def job_model(job: Job) -> JobView:
    """The job as its client sees it: status, timings, and the result or error once final."""
    created_at = _iso(job.created_at)
    updated_at = _iso(job.updated_at)
    assert created_at is not None and updated_at is not None
    return JobView(
        id=job.id,
        status=job.status,
        submission_id=job.request.submission_id,
        assignment_id=job.request.assignment_id,
        student_id=job.request.student_id,
        author=job.author,
        practice=job.request.practice,
        attempts=job.attempts,
        created_at=created_at,
        started_at=_iso(job.started_at),
        completed_at=_iso(job.completed_at),
        last_updated_at=updated_at,
        not_before=job.request.not_before,
        lane=job.lane,
        deadline=job.request.deadline,
        waiting=_waiting(job),
        timings=Timings(**job.timings()),
        files=[
            FileView(upload_id=f.upload_id, name=f.name, content_type=f.content_type, size=f.size)
            for f in job.request.files
        ]
        or None,
        result=_result(job),
        error=JobErrorView(**job.error.to_dict()) if job.error else None,
        review=_review(job),
        regrade_request=regrade_request_view(job),
    )


def _waiting(job: Job) -> BatchWaitView | BudgetHoldView | None:
    held = job.held_since
    if held is not None:
        return BudgetHoldView(since=_iso(held) or "")
    wait = job.provider_batch
    if wait is None or not job.waits_in_batch:
        return None
    return BatchWaitView(
        provider=wait.provider, batch_id=wait.batch_id, since=_iso(wait.since) or ""
    )


def _result(job: Job) -> Result | None:
    """The grade the student may see: none while it waits for a teacher's review; of an
    assignment that posts manually, the posted grade (none before the first post)."""
    result = job.effective_result
    if result is None or (job.review is not None and job.review.withheld):
        return None
    if job.request.post_manually:
        posted = job.posted
        if posted is None:
            return None
        if posted.generation != job.generation or (posted.score, posted.feedback) != (
            result.score,
            result.feedback,
        ):
            # A later grade waits for the teacher's post: the posted version is shown.
            return Result(
                score=posted.score,
                max_score=posted.max_score,
                feedback=posted.feedback,
                criteria=[],
                grader="posted",
            )
    return Result(**result.to_dict())


def _review(job: Job) -> ReviewSummary | None:
    if job.review is None:
        return None
    latest = job.review.latest
    return ReviewSummary(
        status=job.review.status.value,
        reviewed_at=_iso(latest.at) if latest else None,
        decision=latest.decision.value if latest else None,
    )


def job_view(job: Job) -> dict[str, Any]:
    """The JSON of `job_model`, leaving out the result and error until there are any."""
    view: dict[str, Any] = job_model(job).model_dump(mode="json", exclude_none=False)
    optionals = ("result", "error", "not_before", "lane", "files", "review", "student_id")
    for optional in (*optionals, "deadline", "waiting", "regrade_request"):
        if view[optional] is None:
            del view[optional]
    return view
