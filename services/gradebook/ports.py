"""The seam between the gradebook subscriber and each school's LMS connection.

A `GradebookWriter` puts one posted grade into one school's gradebook (an LTI 1.3 AGS
line item, a Google Classroom course work). The subscriber decides what to write and
when (latest version wins); a writer only writes, and says how a write failed:
`GradebookBusy` (try again later; the grade is not spent), `GradebookWriteHeld` (another
delivery is making what this one needs: try again soon) or `GradebookRejected`
(permanent; recorded and shown, never retried).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

GradeSource = Literal["model", "teacher"]
GradingProgress = Literal["FullyGraded", "PendingManual"]


@dataclass(frozen=True)
class PostedGrade:
    """A posted grade as the GradePosted event carries it, plus the student's LMS user id
    (from the roster mapping; None when the roster does not know the student)."""

    school: str
    assignment_id: str
    student_id: str
    submission_id: str
    job_id: str
    version: int
    score: float | None
    max_score: float
    source: GradeSource
    feedback: str | None
    grading_progress: GradingProgress
    posted_at: datetime
    reason: str | None
    lms_user_id: str | None


class GradebookBusy(Exception):
    """The LMS cannot take the grade now (429, 5xx, a timeout): retry later."""

    def __init__(self, retry_after_s: float | None = None, detail: str = "") -> None:
        super().__init__(detail or "the gradebook is busy")
        self.retry_after_s = retry_after_s


class GradebookWriteHeld(Exception):
    """Another delivery holds what this write needs (the course work it is creating): try
    again soon. Not an outage: the LMS answered nothing wrong."""


class GradebookRejected(Exception):
    """The LMS refused the grade for good: recorded and shown, never retried."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class GradebookWriter(Protocol):
    """One school's LMS connection."""

    def write(self, grade: PostedGrade) -> None:
        """Put the grade into the gradebook; idempotent for (student, assignment, version).

        Raises GradebookBusy or GradebookRejected.
        """
        ...
