"""The seam between the gradebook service and each school's LMS connection.

A `GradebookWriter` writes one posted grade to one school's gradebook (an LTI 1.3
Advantage platform, Google Classroom). The service calls it once per posted grade
version; a writer is idempotent for (student, assignment, version), so a redelivered
event writes nothing new. It answers with one of two errors or none:

- `GradebookBusy`: the LMS cannot take the grade now (429, 5xx, a timeout). Retry later;
  the grade is not spent.
- `GradebookRejected`: the LMS refused the grade for good (a 4xx other than 429). It is
  recorded and shown, never retried.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

GradingProgress = Literal["FullyGraded", "PendingManual"]
GradeSource = Literal["model", "teacher"]


@dataclass(frozen=True)
class PostedGrade:
    """A posted grade (the data of a `dev.gradeq.grade.posted.v1` event), with the
    student's user id in the school's LMS where the roster maps it."""

    school: str
    assignment_id: str
    student_id: str
    submission_id: str
    job_id: str
    #: +1 per change of the posted grade: the later version wins.
    version: int
    score: float | None
    max_score: float
    source: GradeSource
    feedback: str | None
    grading_progress: GradingProgress
    posted_at: datetime
    reason: str | None = None
    lms_user_id: str | None = None


class GradebookBusy(Exception):
    """The LMS cannot take the grade now (429, 5xx, timeout): retry, the grade stays."""

    def __init__(self, retry_after_s: float | None = None, detail: str = "") -> None:
        super().__init__(detail or "the gradebook is busy")
        self.retry_after_s = retry_after_s


class GradebookRejected(Exception):
    """The LMS refused the grade for good (a 4xx other than 429): recorded, not retried."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class GradebookWriter(Protocol):
    """One school's LMS connection."""

    def write(self, grade: PostedGrade) -> None:
        """Write the grade; idempotent for (student, assignment, version)."""
        ...
