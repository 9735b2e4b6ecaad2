"""Domain events: plain data. Serialisation (CloudEvents) lives in `shared.codecs`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from shared.domain.assignment import Tally
from shared.domain.ids import (
    assignment_graded_event_id,
    completion_event_id,
    grade_posted_event_id,
    grade_reviewed_event_id,
)
from shared.domain.job import Job
from shared.domain.status import JobStatus


class Outcome(StrEnum):
    """How a job ended, as announced to subscribers."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


_OUTCOMES = {
    JobStatus.SUCCEEDED: Outcome.SUCCEEDED,
    JobStatus.FAILED: Outcome.FAILED,
    JobStatus.CANCELLED: Outcome.CANCELLED,
}


@dataclass(frozen=True)
class GradingCompleted:
    """Exactly one per job, whatever its final state; `event_id` is stable per job."""

    event_id: str
    job_id: str
    client_id: str
    submission_id: str
    assignment_id: str | None
    outcome: Outcome
    score: float | None
    max_score: float
    attempts: int
    timings: dict[str, int | None]
    occurred_at: datetime
    error: dict[str, str] | None = None
    # The model that graded and the tokens it took, so analytics can sum cost per
    # assignment and per client; None for the offline grader and for failed jobs.
    model: str | None = None
    usage: dict[str, int] | None = None
    # The lane the job went through; None for jobs of the default queue made before lanes.
    lane: str | None = None
    # Whether the job names a callback URL (never the URL itself): published as a plain
    # attribute so the notification subscription's filter skips events it has no work for.
    # Not part of the data. None when not known (an event decoded without the attribute).
    has_callback: bool | None = None
    # Who in the school submitted the job ("server", or a signed-in user's id), and
    # whether it was a student's practice job (never the school's webhook or gradebook).
    author: str = "server"
    practice: bool = False

    @classmethod
    def from_job(cls, job: Job) -> GradingCompleted:
        if not job.status.is_final or job.completed_at is None:
            raise ValueError(f"job {job.id} is not final ({job.status})")
        # A reviewed grade is announced with the teacher's score (see shared.domain.review).
        result = job.effective_result
        return cls(
            event_id=completion_event_id(job.id, job.replayed_generation),
            job_id=job.id,
            client_id=job.client_id,
            submission_id=job.request.submission_id,
            assignment_id=job.request.assignment_id,
            outcome=_OUTCOMES[job.status],
            score=result.score if result else None,
            max_score=job.request.max_score,
            attempts=job.attempts,
            timings=job.timings(),
            occurred_at=job.completed_at,
            error=job.error.to_dict() if job.error else None,
            model=(job.result.model or None) if job.result else None,
            usage=(dict(job.result.usage) or None) if job.result else None,
            lane=job.lane,
            has_callback=bool(job.request.callback_url),
            author=job.author,
            practice=job.request.practice,
        )

    def data(self) -> dict[str, Any]:
        """The event's data payload (validated by schemas/grading_completed.v1.json)."""
        return {
            "job_id": self.job_id,
            "client_id": self.client_id,
            "submission_id": self.submission_id,
            "assignment_id": self.assignment_id,
            "outcome": self.outcome.value,
            "score": self.score,
            "max_score": self.max_score,
            "attempts": self.attempts,
            "timings": dict(self.timings),
            # Always null: a callback URL may carry the client's token, and the event
            # reaches analytics (and BigQuery); the notifier reads it from the job.
            "callback_url": None,
            "error": self.error,
            "model": self.model,
            "usage": dict(self.usage) if self.usage is not None else None,
            "lane": self.lane,
            "author": self.author,
            "practice": self.practice,
        }


@dataclass(frozen=True)
class AssignmentGraded:
    """One per grading round of an assignment, once every submission of it is final.

    The id names the assignment, the round and how many submissions it counted, so a
    round that later gains submissions ends again in an event of its own.
    """

    event_id: str
    assignment_id: str
    client_id: str
    round: int
    submissions: int
    succeeded: int
    failed: int
    cancelled: int
    mean_score: float | None
    occurred_at: datetime

    @classmethod
    def of(
        cls, assignment_id: str, client_id: str, round_: int, tally: Tally, now: datetime
    ) -> AssignmentGraded:
        return cls(
            event_id=assignment_graded_event_id(assignment_id, round_, tally.total),
            assignment_id=assignment_id,
            client_id=client_id,
            round=round_,
            submissions=tally.total,
            succeeded=tally.counts.get(JobStatus.SUCCEEDED, 0),
            failed=tally.counts.get(JobStatus.FAILED, 0),
            cancelled=tally.counts.get(JobStatus.CANCELLED, 0),
            mean_score=tally.mean_score,
            occurred_at=now,
        )

    def data(self) -> dict[str, Any]:
        """The event's data payload (validated by schemas/assignment_graded.v1.json)."""
        return {
            "assignment_id": self.assignment_id,
            "client_id": self.client_id,
            "round": self.round,
            "submissions": self.submissions,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "cancelled": self.cancelled,
            "mean_score": self.mean_score,
        }

    @classmethod
    def from_data(
        cls, event_id: str, occurred_at: datetime, data: dict[str, Any]
    ) -> AssignmentGraded:
        mean = data.get("mean_score")
        return cls(
            event_id=event_id,
            assignment_id=data["assignment_id"],
            client_id=data["client_id"],
            round=int(data["round"]),
            submissions=int(data["submissions"]),
            succeeded=int(data["succeeded"]),
            failed=int(data["failed"]),
            cancelled=int(data["cancelled"]),
            mean_score=None if mean is None else float(mean),
            occurred_at=occurred_at,
        )


@dataclass(frozen=True)
class GradeReviewed:
    """One per reviewer's decision on a held grade; the id names job, generation and review."""

    event_id: str
    job_id: str
    client_id: str
    submission_id: str
    assignment_id: str | None
    review: int
    decision: str
    reviewer: str
    model_score: float
    score: float
    max_score: float
    model: str | None
    prompt_version: str | None
    occurred_at: datetime
    # Who in the school (`client_id`) submitted the reviewed job: "server" or a user id.
    author: str = "server"

    @classmethod
    def from_job(cls, job: Job) -> GradeReviewed:
        latest = job.review.latest if job.review is not None else None
        if latest is None or job.result is None:
            raise ValueError(f"job {job.id} has no review")
        return cls(
            event_id=grade_reviewed_event_id(job.id, job.generation, latest.number),
            job_id=job.id,
            client_id=job.client_id,
            submission_id=job.request.submission_id,
            assignment_id=job.request.assignment_id,
            review=latest.number,
            decision=latest.decision.value,
            reviewer=latest.by,
            model_score=job.result.score,
            score=latest.result.score,
            max_score=job.result.max_score,
            model=job.result.model or None,
            prompt_version=job.result.prompt_version or None,
            occurred_at=latest.at,
            author=job.author,
        )

    def data(self) -> dict[str, Any]:
        """The event's data payload (validated by schemas/grade_reviewed.v1.json)."""
        return {
            "job_id": self.job_id,
            "client_id": self.client_id,
            "submission_id": self.submission_id,
            "assignment_id": self.assignment_id,
            "review": self.review,
            "decision": self.decision,
            "reviewer": self.reviewer,
            "model_score": self.model_score,
            "score": self.score,
            "max_score": self.max_score,
            "model": self.model,
            "prompt_version": self.prompt_version,
            "author": self.author,
        }


@dataclass(frozen=True)
class GradePosted:
    """One per version of a submission's posted grade: the first post, and every change
    after it (an override, a regrade the teacher posts). The id names job and version."""

    event_id: str
    school: str
    assignment_id: str
    student_id: str | None
    submission_id: str
    job_id: str
    version: int
    score: float
    max_score: float
    source: str
    feedback: str
    grading_progress: str
    posted_at: datetime
    reason: str
    # Whether the job names a callback URL and is the school's (never the URL itself): a
    # plain attribute, so the notification subscription's filter pushes only the posted
    # grades it has a webhook for. Not part of the data; None when not known.
    has_callback: bool | None = None

    @classmethod
    def from_job(cls, job: Job) -> GradePosted:
        posted = job.posted
        if posted is None or job.request.assignment_id is None:
            raise ValueError(f"job {job.id} has no posted grade")
        return cls(
            event_id=grade_posted_event_id(job.id, posted.version),
            school=job.client_id,
            assignment_id=job.request.assignment_id,
            student_id=job.request.student_id,
            submission_id=job.request.submission_id,
            job_id=job.id,
            version=posted.version,
            score=posted.score,
            max_score=posted.max_score,
            source=posted.source,
            feedback=posted.feedback,
            grading_progress=posted.progress,
            posted_at=posted.at,
            reason=posted.reason,
            has_callback=bool(job.request.callback_url) and not job.request.practice,
        )

    def data(self) -> dict[str, Any]:
        """The event's data payload (validated by schemas/grade_posted.v1.json)."""
        return {
            "school": self.school,
            "assignment_id": self.assignment_id,
            "student_id": self.student_id,
            "submission_id": self.submission_id,
            "job_id": self.job_id,
            "version": self.version,
            "score": self.score,
            "max_score": self.max_score,
            "source": self.source,
            "feedback": self.feedback,
            "grading_progress": self.grading_progress,
            "posted_at": self.posted_at.isoformat(),
            "reason": self.reason,
        }
