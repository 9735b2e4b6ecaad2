"""Read a GradePosted CloudEvent from a Pub/Sub push (binary mode, like every event on
the topic): `dev.gradeq.grade.posted.v1`, one per change of a student's posted grade.

The decoding is the shared codec's (shared.codecs.push_envelope, shared.codecs.cloudevent),
the one posting publishes with and the notification service reads with: the data is
checked against its schema (shared/schemas/grade_posted.v1.json). The event id is stable
per (submission, version), so a redelivery carries the same id and the same version.
Anything else on the topic is not for this subscriber.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from services.gradebook.ports import GradeSource, GradingProgress, PostedGrade
from shared.codecs.cloudevent import GRADE_POSTED_TYPE
from shared.codecs.push_envelope import (
    InvalidPushEnvelope,
    grade_posted_from_push_envelope,
)
from shared.codecs.push_envelope import event_type as push_event_type
from shared.domain.errors import GradeqError
from shared.domain.events import GradePosted

__all__ = [
    "GRADE_POSTED_TYPE",
    "GradePosted",
    "InvalidGradePosted",
    "ReceivedGrade",
    "from_push",
    "posted_grade",
    "push_event_type",
]


class InvalidGradePosted(GradeqError):
    """The push does not carry a valid GradePosted event."""

    slug = "invalid-grade-posted"
    title = "The message is not a valid GradePosted event"
    status = 400


@dataclass(frozen=True)
class ReceivedGrade:
    """One pushed GradePosted and the delivery facts that came with it."""

    event_id: str
    grade: GradePosted
    message_id: str
    delivery_attempt: int | None


def from_push(body: object) -> ReceivedGrade:
    """Decode a Pub/Sub push body carrying a GradePosted; raise InvalidGradePosted."""
    try:
        grade = grade_posted_from_push_envelope(body)
    except InvalidPushEnvelope as exc:
        raise InvalidGradePosted(exc.detail, **exc.extensions) from exc
    assert isinstance(body, dict)  # the envelope was decoded from it
    message = body["message"]
    message_id = message.get("messageId") or message.get("message_id")
    if not isinstance(message_id, str) or not message_id:
        raise InvalidGradePosted("the message has no messageId")
    if grade.posted_at.tzinfo is None:
        raise InvalidGradePosted("'posted_at' must carry a UTC offset")
    attempt = body.get("deliveryAttempt")
    # Pub/Sub sends it only when the subscription has a dead-letter policy.
    counted = isinstance(attempt, int) and not isinstance(attempt, bool)
    return ReceivedGrade(
        event_id=grade.event_id,
        grade=grade,
        message_id=message_id,
        delivery_attempt=attempt if counted else None,
    )


def posted_grade(grade: GradePosted, lms_user_id: str | None) -> PostedGrade:
    """The grade a GradebookWriter takes, with the student's LMS user id."""
    if grade.student_id is None:
        raise ValueError("a grade that names no student has no gradebook row")
    return PostedGrade(
        school=grade.school,
        assignment_id=grade.assignment_id,
        student_id=grade.student_id,
        submission_id=grade.submission_id,
        job_id=grade.job_id,
        version=grade.version,
        score=grade.score,
        max_score=grade.max_score,
        # The schema admits only these values.
        source=cast(GradeSource, grade.source),
        feedback=grade.feedback,
        grading_progress=cast(GradingProgress, grade.grading_progress),
        posted_at=grade.posted_at,
        reason=grade.reason,
        lms_user_id=lms_user_id,
    )
