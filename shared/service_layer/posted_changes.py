"""A new version of a posted grade, when a teacher changes it after it was released.

The grade's life owns the event (`GradePosted`, `dev.gradeq.grade.posted.v1`); this
module builds its data from the job and hands it to the function that publishes it
(`PostGradeChange`), called where a review's events are announced, so a change whose
announcement a crash cut off is posted again with the same version.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from shared.domain.job import Job
from shared.domain.review import ReviewDecision
from shared.logs import job_context

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GradePostedChange:
    """A new version of a posted grade, with the data of `dev.gradeq.grade.posted.v1`
    (the `GradePosted` event of the grade's life: school, assignment, student,
    submission, job, version, final score, source, feedback, progress, when, why)."""

    school: str
    assignment_id: str | None
    student_id: str | None
    submission_id: str
    job_id: str
    version: int
    score: float
    max_score: float
    source: Literal["model", "teacher"]
    feedback: str
    grading_progress: Literal["FullyGraded", "PendingManual"]
    posted_at: datetime
    reason: str

    def data(self) -> dict[str, Any]:
        """The event's data, as the contract spells it."""
        data = dataclasses.asdict(self)
        data["posted_at"] = self.posted_at.isoformat()
        return data


#: Publishes a new version of a posted grade (the grade's life owns the event).
PostGradeChange = Callable[[GradePostedChange], None]


def posted_change(job: Job, reason: str, now: datetime) -> GradePostedChange:
    """The posted grade's new version after a teacher changed it: version 1 was the grade
    as first released, each change a version more."""
    assert job.review is not None
    result = job.effective_result
    assert result is not None
    changes = sum(1 for r in job.review.reviews if r.decision is ReviewDecision.OVERRIDE)
    return GradePostedChange(
        school=job.client_id,
        assignment_id=job.request.assignment_id,
        student_id=job.request.student_id,
        submission_id=job.request.submission_id,
        job_id=job.id,
        version=1 + changes,
        score=result.score,
        max_score=job.request.max_score,
        source="teacher",
        feedback=result.feedback,
        grading_progress="FullyGraded",
        posted_at=now,
        reason=reason,
    )


def log_grade_change(change: GradePostedChange) -> None:
    """Record a changed posted grade's version in the logs (ids and score, never the
    feedback); used where no publisher of posted grades is wired."""
    with job_context(change.job_id):
        log.info(
            "posted grade changed",
            extra={"event": "grade_posted", "version": change.version, "score": change.score},
        )
