"""Parse the JSON body a Pub/Sub push subscription POSTs (the embedded bus sends the same).

Body: {"message": {"data": base64, "attributes": {...}, "messageId", "publishTime"},
"subscription": "projects/.../subscriptions/...", "deliveryAttempt": n}. Pub/Sub also
sends the snake_case twins `message_id` and `publish_time`; either spelling is accepted.
A 400 answer makes Pub/Sub redeliver until the dead-letter policy parks the message,
which is where a poison message belongs.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from shared.codecs.cloudevent import from_pubsub, grade_posted_from_pubsub
from shared.domain.errors import GradeqError
from shared.domain.events import GradePosted, GradingCompleted


class InvalidPushEnvelope(GradeqError):
    """The push request body is not a Pub/Sub push envelope carrying a GradingCompleted."""

    slug = "invalid-push-envelope"
    title = "The request body is not a valid Pub/Sub push envelope"
    status = 400


@dataclass(frozen=True)
class ReceivedEvent:
    """One pushed event and the delivery facts that came with it."""

    event: GradingCompleted
    message_id: str
    publish_time: datetime | None
    subscription: str | None
    delivery_attempt: int | None
    attributes: dict[str, str]


def from_push_envelope(body: object) -> ReceivedEvent:
    """Validate a push body and decode its event; raise InvalidPushEnvelope otherwise."""
    if not isinstance(body, dict):
        raise InvalidPushEnvelope("the body must be a JSON object")
    message = body.get("message")
    if not isinstance(message, dict):
        raise InvalidPushEnvelope("the body has no 'message' object")
    attributes = _attributes(message.get("attributes"))
    data = _data(message.get("data"))
    message_id = message.get("messageId") or message.get("message_id")
    if not isinstance(message_id, str) or not message_id:
        raise InvalidPushEnvelope("the message has no messageId")
    try:
        event = from_pubsub(data, attributes)
    except GradeqError as exc:
        raise InvalidPushEnvelope(exc.detail, **exc.extensions) from exc
    subscription = body.get("subscription")
    return ReceivedEvent(
        event=event,
        message_id=message_id,
        publish_time=_publish_time(message.get("publishTime") or message.get("publish_time")),
        subscription=subscription if isinstance(subscription, str) else None,
        delivery_attempt=_delivery_attempt(body.get("deliveryAttempt")),
        attributes=attributes,
    )


def grade_posted_from_push_envelope(body: object) -> GradePosted:
    """Decode a push body carrying a GradePosted; raise InvalidPushEnvelope otherwise."""
    if not isinstance(body, dict):
        raise InvalidPushEnvelope("the body must be a JSON object")
    message = body.get("message")
    if not isinstance(message, dict):
        raise InvalidPushEnvelope("the body has no 'message' object")
    attributes = _attributes(message.get("attributes"))
    data = _data(message.get("data"))
    try:
        return grade_posted_from_pubsub(data, attributes)
    except GradeqError as exc:
        raise InvalidPushEnvelope(exc.detail, **exc.extensions) from exc


def event_type(body: object) -> str | None:
    """The CloudEvents type a push body's message names (None when it names none)."""
    message = body.get("message") if isinstance(body, dict) else None
    attributes = message.get("attributes") if isinstance(message, dict) else None
    if not isinstance(attributes, dict):
        return None
    found = {str(k).lower(): v for k, v in attributes.items()}.get("ce-type")
    return found if isinstance(found, str) else None


def _attributes(value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise InvalidPushEnvelope("message.attributes must be an object of strings")
    return dict(value)


def _data(value: Any) -> bytes:
    if not isinstance(value, str) or not value:
        raise InvalidPushEnvelope("message.data must be a non-empty base64 string")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidPushEnvelope("message.data is not valid base64") from exc


def _publish_time(value: Any) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidPushEnvelope("message.publishTime must be an RFC 3339 string")
    try:
        return datetime.fromisoformat(value)
    except ValueError as exc:
        raise InvalidPushEnvelope(f"message.publishTime is not RFC 3339: {value!r}") from exc


def _delivery_attempt(value: Any) -> int | None:
    # Pub/Sub sends it only when the subscription has a dead-letter policy.
    return value if isinstance(value, int) and not isinstance(value, bool) else None
