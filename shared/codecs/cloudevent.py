"""GradingCompleted <-> CloudEvent, and the CloudEvents binary mode on Pub/Sub messages.

Binary mode follows the CloudEvents Pub/Sub binding: each context attribute becomes a
`ce-` message attribute, `datacontenttype` becomes `content-type`, and the message data
is the JSON event data. The attribute mapping is the same as the HTTP binding's header
mapping, so the SDK's HTTP binding does the work.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any, Final

from cloudevents.core.base import BaseCloudEvent
from cloudevents.core.bindings.http import (
    HTTPMessage,
    from_binary,
    to_binary,
    to_structured,
)
from cloudevents.core.exceptions import BaseCloudEventException
from cloudevents.core.formats.json import JSONFormat
from cloudevents.core.v1.event import CloudEvent

from shared.codecs.event_schema import (
    assignment_graded_errors,
    assignment_graded_schema,
    grade_posted_errors,
    grade_posted_schema,
    grade_reviewed_errors,
    grade_reviewed_schema,
    schema_errors,
    schema_id,
)
from shared.domain.errors import GradeqError
from shared.domain.events import (
    AssignmentGraded,
    GradePosted,
    GradeReviewed,
    GradingCompleted,
    Outcome,
)

EVENT_TYPE: Final = "dev.gradeq.grading.completed.v1"
#: One per grading round of an assignment, on the same topic as the jobs' events.
ASSIGNMENT_GRADED_TYPE: Final = "dev.gradeq.assignment.graded.v1"
GRADE_REVIEWED_TYPE: Final = "dev.gradeq.grade.reviewed.v1"
GRADE_POSTED_TYPE: Final = "dev.gradeq.grade.posted.v1"
EVENT_SOURCE: Final = "//gradeq/worker"
DATA_CONTENT_TYPE: Final = "application/json"

#: Plain (non-CloudEvents) attributes, so subscriptions can filter without decoding data.
FILTER_ATTRIBUTES: Final = ("outcome", "client_id", "has_callback")
#: Values of `has_callback`: whether the event's job names a callback URL.
_HAS_CALLBACK: Final = {True: "true", False: "false"}


def callback_attribute(has_callback: bool) -> dict[str, str]:
    """The attribute a GradingCompleted carries for a job with (or without) a callback URL."""
    return {"has_callback": _HAS_CALLBACK[has_callback]}


_FORMAT = JSONFormat()
STRUCTURED_CONTENT_TYPE: Final = _FORMAT.get_content_type()
_REQUIRED_ATTRIBUTES: Final = ("ce-id", "ce-specversion", "ce-type", "ce-source", "ce-time")


class InvalidEvent(GradeqError):
    """A message that is not a valid GradingCompleted v1 CloudEvent."""

    slug = "invalid-event"
    title = "The message is not a valid GradingCompleted event"
    status = 400


def to_cloudevent(event: GradingCompleted) -> CloudEvent:
    """Wrap the domain event in a CloudEvent (the id is the stable event id)."""
    return CloudEvent(
        {
            "id": event.event_id,
            "type": EVENT_TYPE,
            "source": EVENT_SOURCE,
            "time": event.occurred_at,
            "subject": event.job_id,
            "datacontenttype": DATA_CONTENT_TYPE,
            "dataschema": schema_id(),
        },
        event.data(),
    )


def from_cloudevent(cloudevent: BaseCloudEvent) -> GradingCompleted:
    """Check the CloudEvent's type and data against the schema and rebuild the event."""
    if cloudevent.get_type() != EVENT_TYPE:
        raise InvalidEvent(f"unexpected event type {cloudevent.get_type()!r}")
    occurred_at = cloudevent.get_time()
    if occurred_at is None:
        raise InvalidEvent("the event has no time")
    data = cloudevent.get_data()
    if not isinstance(data, dict):
        raise InvalidEvent("the event data is not a JSON object")
    errors = schema_errors(data)
    if errors:
        raise InvalidEvent("the event data does not match its schema", errors=errors)
    return _event(cloudevent.get_id(), occurred_at, data)


def _event(event_id: str, occurred_at: datetime, data: dict[str, Any]) -> GradingCompleted:
    score = data["score"]
    return GradingCompleted(
        event_id=event_id,
        job_id=data["job_id"],
        client_id=data["client_id"],
        submission_id=data["submission_id"],
        assignment_id=data["assignment_id"],
        outcome=Outcome(data["outcome"]),
        score=None if score is None else float(score),
        max_score=float(data["max_score"]),
        attempts=int(data["attempts"]),
        timings=dict(data["timings"]),
        occurred_at=occurred_at,
        error=dict(data["error"]) if data["error"] is not None else None,
        model=data.get("model"),
        usage=dict(data["usage"]) if data.get("usage") is not None else None,
        lane=data.get("lane"),
        author=data.get("author") or "server",
        practice=bool(data.get("practice", False)),
    )


def assignment_graded_cloudevent(event: AssignmentGraded) -> CloudEvent:
    """Wrap an AssignmentGraded in a CloudEvent (the id names the assignment's round)."""
    return CloudEvent(
        {
            "id": event.event_id,
            "type": ASSIGNMENT_GRADED_TYPE,
            "source": EVENT_SOURCE,
            "time": event.occurred_at,
            "subject": event.assignment_id,
            "datacontenttype": DATA_CONTENT_TYPE,
            "dataschema": str(assignment_graded_schema()["$id"]),
        },
        event.data(),
    )


def assignment_graded_from_cloudevent(cloudevent: BaseCloudEvent) -> AssignmentGraded:
    """Check an AssignmentGraded CloudEvent against its schema and rebuild the event."""
    if cloudevent.get_type() != ASSIGNMENT_GRADED_TYPE:
        raise InvalidEvent(f"unexpected event type {cloudevent.get_type()!r}")
    occurred_at = cloudevent.get_time()
    data = cloudevent.get_data()
    if occurred_at is None or not isinstance(data, dict):
        raise InvalidEvent("the event has no time or no JSON object data")
    errors = assignment_graded_errors(data)
    if errors:
        raise InvalidEvent("the event data does not match its schema", errors=errors)
    return AssignmentGraded.from_data(cloudevent.get_id(), occurred_at, data)


def grade_reviewed_cloudevent(event: GradeReviewed) -> CloudEvent:
    """Wrap a GradeReviewed in a CloudEvent (the id names the job, generation and review)."""
    errors = grade_reviewed_errors(event.data())
    if errors:
        raise InvalidEvent("the event data does not match its schema", errors=errors)
    return CloudEvent(
        {
            "id": event.event_id,
            "type": GRADE_REVIEWED_TYPE,
            "source": EVENT_SOURCE,
            "time": event.occurred_at,
            "subject": event.job_id,
            "datacontenttype": DATA_CONTENT_TYPE,
            "dataschema": str(grade_reviewed_schema()["$id"]),
        },
        event.data(),
    )


def grade_posted_cloudevent(event: GradePosted) -> CloudEvent:
    """Wrap a GradePosted in a CloudEvent (the id names the submission's job and version)."""
    errors = grade_posted_errors(event.data())
    if errors:
        raise InvalidEvent("the event data does not match its schema", errors=errors)
    return CloudEvent(
        {
            "id": event.event_id,
            "type": GRADE_POSTED_TYPE,
            "source": EVENT_SOURCE,
            "time": event.posted_at,
            "subject": event.job_id,
            "datacontenttype": DATA_CONTENT_TYPE,
            "dataschema": str(grade_posted_schema()["$id"]),
        },
        event.data(),
    )


def to_pubsub(
    event: GradingCompleted | AssignmentGraded | GradeReviewed | GradePosted,
) -> tuple[bytes, dict[str, str]]:
    """Encode the event for a Pub/Sub publish: (data, attributes) in binary mode."""
    if isinstance(event, GradePosted):
        posted = to_binary(grade_posted_cloudevent(event), _FORMAT)
        attributes = {**posted.headers, "client_id": event.school}
        if event.has_callback is not None:
            attributes.update(callback_attribute(event.has_callback))
        return posted.body, attributes
    if isinstance(event, GradeReviewed):
        reviewed = to_binary(grade_reviewed_cloudevent(event), _FORMAT)
        return reviewed.body, {**reviewed.headers, "client_id": event.client_id}
    if isinstance(event, AssignmentGraded):
        graded = to_binary(assignment_graded_cloudevent(event), _FORMAT)
        return graded.body, {**graded.headers, "client_id": event.client_id}
    message = to_binary(to_cloudevent(event), _FORMAT)
    attributes = dict(message.headers)
    attributes["outcome"] = event.outcome.value
    attributes["client_id"] = event.client_id
    if event.has_callback is not None:
        attributes.update(callback_attribute(event.has_callback))
    return message.body, attributes


def from_pubsub(data: bytes, attributes: Mapping[str, str]) -> GradingCompleted:
    """Decode a binary-mode Pub/Sub message; raise InvalidEvent when it is not one."""
    # Attribute names are case-insensitive in the binding; some producers also spell
    # the content type as ce-datacontenttype instead of content-type.
    headers = {name.lower(): value for name, value in attributes.items()}
    content_type = headers.pop("ce-datacontenttype", None)
    headers.setdefault("content-type", content_type or DATA_CONTENT_TYPE)
    has_callback = headers.get("has_callback")
    for name in FILTER_ATTRIBUTES:
        headers.pop(name, None)
    # The SDK would invent a missing id or time; a message without them is not ours.
    missing = [name for name in _REQUIRED_ATTRIBUTES if not headers.get(name)]
    if missing:
        raise InvalidEvent(f"the message lacks CloudEvents attributes: {', '.join(missing)}")
    try:
        cloudevent = from_binary(HTTPMessage(headers=headers, body=data), _FORMAT, CloudEvent)
    except (BaseCloudEventException, ValueError, TypeError) as exc:
        raise InvalidEvent(f"invalid CloudEvents attributes: {exc}") from exc
    event = from_cloudevent(cloudevent)
    if has_callback in ("true", "false"):
        event = replace(event, has_callback=has_callback == "true")
    return event


def to_structured_json(event: GradingCompleted | GradePosted) -> bytes:
    """Render the event as one structured-mode CloudEvent JSON document (webhook bodies)."""
    if isinstance(event, GradePosted):
        return to_structured(grade_posted_cloudevent(event), _FORMAT).body
    return to_structured(to_cloudevent(event), _FORMAT).body


def grade_posted_from_pubsub(data: bytes, attributes: Mapping[str, str]) -> GradePosted:
    """Decode a binary-mode Pub/Sub message carrying a GradePosted; raise InvalidEvent."""
    headers = {name.lower(): value for name, value in attributes.items()}
    content_type = headers.pop("ce-datacontenttype", None)
    headers.setdefault("content-type", content_type or DATA_CONTENT_TYPE)
    has_callback = headers.get("has_callback")
    headers = {k: v for k, v in headers.items() if k.startswith("ce-") or k == "content-type"}
    missing = [name for name in _REQUIRED_ATTRIBUTES if not headers.get(name)]
    if missing:
        raise InvalidEvent(f"the message lacks CloudEvents attributes: {', '.join(missing)}")
    try:
        cloudevent = from_binary(HTTPMessage(headers=headers, body=data), _FORMAT, CloudEvent)
    except (BaseCloudEventException, ValueError, TypeError) as exc:
        raise InvalidEvent(f"invalid CloudEvents attributes: {exc}") from exc
    if cloudevent.get_type() != GRADE_POSTED_TYPE:
        raise InvalidEvent(f"unexpected event type {cloudevent.get_type()!r}")
    payload = cloudevent.get_data()
    errors = grade_posted_errors(payload)
    if errors or not isinstance(payload, dict):
        raise InvalidEvent("the event data does not match its schema", errors=errors)
    return GradePosted(
        event_id=cloudevent.get_id(),
        school=payload["school"],
        assignment_id=payload["assignment_id"],
        student_id=payload.get("student_id"),
        submission_id=payload["submission_id"],
        job_id=payload["job_id"],
        version=payload["version"],
        score=payload["score"],
        max_score=payload["max_score"],
        source=payload["source"],
        feedback=payload["feedback"],
        grading_progress=payload["grading_progress"],
        posted_at=datetime.fromisoformat(payload["posted_at"]),
        reason=payload["reason"],
        has_callback=has_callback == "true" if has_callback in ("true", "false") else None,
    )
