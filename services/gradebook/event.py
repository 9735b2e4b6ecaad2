"""Read a GradePosted CloudEvent from a Pub/Sub push (binary mode, like every event on
the topic): `dev.gradeq.grade.posted.v1`, one per change of a student's posted grade.

The event id is stable per (submission, version), so a redelivery carries the same id
and the same version. Anything else on the topic is not for this subscriber.
"""

from __future__ import annotations

import base64
import binascii
import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, get_args

from cloudevents.core.bindings.http import HTTPMessage, from_binary
from cloudevents.core.exceptions import BaseCloudEventException
from cloudevents.core.formats.json import JSONFormat
from cloudevents.core.v1.event import CloudEvent

from services.gradebook.ports import GradeSource, GradingProgress, PostedGrade
from shared.domain.errors import GradeqError

GRADE_POSTED_TYPE: Final = "dev.gradeq.grade.posted.v1"
_FORMAT = JSONFormat()
_REQUIRED: Final = ("ce-id", "ce-specversion", "ce-type", "ce-source")


class InvalidGradePosted(GradeqError):
    """The push does not carry a valid GradePosted event."""

    slug = "invalid-grade-posted"
    title = "The message is not a valid GradePosted event"
    status = 400


@dataclass(frozen=True)
class GradePosted:
    """The data of one GradePosted event."""

    school: str
    assignment_id: str
    #: None for a submission that names no student (nothing for a gradebook to write).
    student_id: str | None
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

    def posted(self, lms_user_id: str | None) -> PostedGrade:
        """The grade a GradebookWriter takes, with the student's LMS user id."""
        if self.student_id is None:
            raise ValueError("a grade that names no student has no gradebook row")
        return PostedGrade(
            school=self.school,
            assignment_id=self.assignment_id,
            student_id=self.student_id,
            submission_id=self.submission_id,
            job_id=self.job_id,
            version=self.version,
            score=self.score,
            max_score=self.max_score,
            source=self.source,
            feedback=self.feedback,
            grading_progress=self.grading_progress,
            posted_at=self.posted_at,
            reason=self.reason,
            lms_user_id=lms_user_id,
        )


@dataclass(frozen=True)
class ReceivedGrade:
    """One pushed GradePosted and the delivery facts that came with it."""

    event_id: str
    grade: GradePosted
    message_id: str
    delivery_attempt: int | None


def push_event_type(body: object) -> str | None:
    """The `ce-type` attribute of a push body's message (None when it has none)."""
    message = body.get("message") if isinstance(body, dict) else None
    attributes = message.get("attributes") if isinstance(message, dict) else None
    if not isinstance(attributes, dict):
        return None
    found = {str(k).lower(): v for k, v in attributes.items()}.get("ce-type")
    return found if isinstance(found, str) else None


def from_push(body: object) -> ReceivedGrade:
    """Decode a Pub/Sub push body carrying a GradePosted; raise InvalidGradePosted."""
    message = body.get("message") if isinstance(body, dict) else None
    if not isinstance(message, dict):
        raise InvalidGradePosted("the body has no 'message' object")
    attributes = message.get("attributes")
    if not isinstance(attributes, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in attributes.items()
    ):
        raise InvalidGradePosted("message.attributes must be an object of strings")
    message_id = message.get("messageId") or message.get("message_id")
    if not isinstance(message_id, str) or not message_id:
        raise InvalidGradePosted("the message has no messageId")
    try:
        data = base64.b64decode(str(message.get("data") or ""), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidGradePosted("message.data is not valid base64") from exc
    headers = {name.lower(): value for name, value in attributes.items()}
    content_type = headers.pop("ce-datacontenttype", None)
    headers.setdefault("content-type", content_type or "application/json")
    missing = [name for name in _REQUIRED if not headers.get(name)]
    if missing:
        raise InvalidGradePosted(f"the message lacks CloudEvents attributes: {', '.join(missing)}")
    headers = {k: v for k, v in headers.items() if k.startswith("ce-") or k == "content-type"}
    try:
        event = from_binary(HTTPMessage(headers=headers, body=data), _FORMAT, CloudEvent)
    except (BaseCloudEventException, ValueError, TypeError) as exc:
        raise InvalidGradePosted(f"invalid CloudEvents attributes: {exc}") from exc
    if event.get_type() != GRADE_POSTED_TYPE:
        raise InvalidGradePosted(f"unexpected event type {event.get_type()!r}")
    attempt = body.get("deliveryAttempt") if isinstance(body, dict) else None
    return ReceivedGrade(
        event_id=event.get_id(),
        grade=grade_posted(event.get_data()),
        message_id=message_id,
        delivery_attempt=attempt if isinstance(attempt, int) else None,
    )


def _text(data: dict[str, Any], name: str, *, optional: bool = False) -> Any:
    value = data.get(name)
    if optional:
        if value is not None and not isinstance(value, str):
            raise InvalidGradePosted(f"'{name}' must be a string or null")
        return value
    if not isinstance(value, str) or not value:
        raise InvalidGradePosted(f"'{name}' must be a non-empty string")
    return value


def _number(data: dict[str, Any], name: str, *, optional: bool = False) -> float | None:
    value = data.get(name)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidGradePosted(f"'{name}' must be a finite number")
    return float(value)


def _choice(data: dict[str, Any], name: str, allowed: tuple[str, ...]) -> Any:
    value = data.get(name)
    if value not in allowed:
        raise InvalidGradePosted(f"'{name}' must be one of {', '.join(allowed)}")
    return value


def grade_posted(data: object) -> GradePosted:
    """Check a GradePosted event's data and read it; raise InvalidGradePosted."""
    if not isinstance(data, dict):
        raise InvalidGradePosted("the event data is not a JSON object")
    version = data.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise InvalidGradePosted("'version' must be a positive integer")
    max_score = _number(data, "max_score")
    if max_score is None or max_score <= 0:
        raise InvalidGradePosted("'max_score' must be positive")
    try:
        posted_at = datetime.fromisoformat(_text(data, "posted_at"))
    except ValueError as exc:
        raise InvalidGradePosted("'posted_at' must be an RFC 3339 timestamp") from exc
    if posted_at.tzinfo is None:
        raise InvalidGradePosted("'posted_at' must carry a UTC offset")
    return GradePosted(
        school=_text(data, "school"),
        assignment_id=_text(data, "assignment_id"),
        student_id=_text(data, "student_id", optional=True),
        submission_id=_text(data, "submission_id"),
        job_id=_text(data, "job_id"),
        version=version,
        score=_number(data, "score", optional=True),
        max_score=max_score,
        source=_choice(data, "source", get_args(GradeSource)),
        feedback=_text(data, "feedback", optional=True),
        grading_progress=_choice(data, "grading_progress", get_args(GradingProgress)),
        posted_at=posted_at,
        reason=_text(data, "reason", optional=True),
    )
