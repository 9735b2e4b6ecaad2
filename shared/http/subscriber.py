"""Flask plumbing every event subscriber shares: the authenticated push route and probes.

A handler answers 2xx only after its work is durable; any error becomes a problem
document with a non-2xx status, and the bus (or Pub/Sub) redelivers with backoff. A
malformed delivery can never succeed, so it is recorded once and acknowledged (204):
redelivering it would only repeat the failure until the message expires.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from contextlib import ExitStack

from flask import Blueprint, Flask, Response, g, request

from shared.codecs.cloudevent import (
    ASSIGNMENT_GRADED_TYPE,
    GRADE_POSTED_TYPE,
    GRADE_REVIEWED_TYPE,
)
from shared.codecs.push_envelope import (
    InvalidPushEnvelope,
    ReceivedEvent,
    event_type,
    from_push_envelope,
    grade_posted_from_push_envelope,
)
from shared.domain.events import GradePosted
from shared.http.health import register_health
from shared.http.push_auth import PushVerifier, require_push_token
from shared.logs import job_context
from shared.ports import ProcessedEvents

PUSH_PATH = "/pubsub/push"
#: Event types on the topic that the job subscribers acknowledge without handling.
IGNORED_TYPES = frozenset({ASSIGNMENT_GRADED_TYPE, GRADE_REVIEWED_TYPE, GRADE_POSTED_TYPE})
log = logging.getLogger(__name__)


#: Called with the raw body of a delivery that cannot be decoded, and why.
MalformedHandler = Callable[[bytes, InvalidPushEnvelope], None]


def _decode(raw: bytes) -> object:
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None  # from_push_envelope refuses it as "not a JSON object"


def push_blueprint(
    verifier: PushVerifier,
    handle: Callable[[ReceivedEvent], None],
    malformed: MalformedHandler | None = None,
    handle_posted: Callable[[GradePosted], None] | None = None,
) -> Blueprint:
    """Serve POST /pubsub/push: check the bearer token, decode the event, run `handle`.

    With `malformed`, an undecodable delivery is passed to it and acknowledged; without,
    it is answered 400 (and redelivered). With `handle_posted`, GradePosted events are
    decoded and passed to it; without, they are acknowledged like the other kinds.
    """
    blueprint = Blueprint("pubsub", __name__, url_prefix="/pubsub")
    blueprint.before_request(require_push_token(verifier))

    @blueprint.post("/push")
    def push() -> Response:
        raw = request.get_data(cache=False)
        body = _decode(raw)
        if handle_posted is not None and event_type(body) == GRADE_POSTED_TYPE:
            try:
                posted = grade_posted_from_push_envelope(body)
            except InvalidPushEnvelope as exc:
                if malformed is None:
                    raise
                malformed(raw, exc)
                return Response(status=204)
            g.job_context = ExitStack()
            g.job_context.enter_context(job_context(posted.job_id))
            handle_posted(posted)
            return Response(status=204)
        if event_type(body) in IGNORED_TYPES:
            # Another kind of event on the same topic: nothing for this subscriber to do.
            log.info("event of another type acknowledged", extra={"type": event_type(body)})
            return Response(status=204)
        try:
            received = from_push_envelope(body)
        except InvalidPushEnvelope as exc:
            if malformed is None:
                raise
            malformed(raw, exc)
            return Response(status=204)
        # Held until teardown, so the error handler's log line carries the job id too.
        g.job_context = ExitStack()
        g.job_context.enter_context(job_context(received.event.job_id))
        g.push_received = received
        handle(received)
        return Response(status=204)

    @blueprint.after_request
    def _log_answer(response: Response) -> Response:
        # One line per push, whatever became of it, so a message that never arrives can
        # be told from one that was refused, redelivered or acknowledged.
        received: ReceivedEvent | None = g.get("push_received")
        log.info(
            "push answered",
            extra={
                "status": response.status_code,
                "message_id": received.message_id if received else None,
                "delivery_attempt": received.delivery_attempt if received else None,
                "subscription": received.subscription if received else None,
                "event_id": received.event.event_id if received else None,
            },
        )
        return response

    @blueprint.teardown_request
    def _leave_job_context(_error: BaseException | None) -> None:
        stack: ExitStack | None = g.pop("job_context", None)
        if stack is not None:
            stack.close()

    return blueprint


def register_subscriber_health(app: Flask, processed: ProcessedEvents) -> None:
    """Serve the health endpoints; ready when the processed-events store answers."""
    register_health(app, [("processed_events", lambda: _probe(processed))])


def _probe(processed: ProcessedEvents) -> None:
    processed.contains("readyz", "probe")


def record_malformed(processed: ProcessedEvents, subscriber: str) -> MalformedHandler:
    """Record each malformed delivery once (by message id, else body hash) and log it once."""

    def _record(raw: bytes, error: InvalidPushEnvelope) -> None:
        key = _message_id(raw) or "sha256:" + hashlib.sha256(raw).hexdigest()
        record_malformed_message(processed, subscriber, key, error.detail, len(raw))

    return _record


def record_malformed_message(
    processed: ProcessedEvents, subscriber: str, key: str, reason: str, size: int
) -> bool:
    """Record a message that cannot be decoded under `key` ("message:<id>" when it has an
    id), once, and log it once; True when this call recorded it."""
    created = processed.add(f"{subscriber}.malformed", key, {"reason": reason, "bytes": size})
    if created:
        log.error(
            "malformed push acknowledged and recorded", extra={"reason": reason, "delivery": key}
        )
    else:
        log.info("malformed push redelivered; already recorded", extra={"delivery": key})
    return created


def _message_id(raw: bytes) -> str | None:
    body = _decode(raw)
    message = body.get("message") if isinstance(body, dict) else None
    found = message.get("messageId") if isinstance(message, dict) else None
    if isinstance(found, str) and 0 < len(found) <= 200:
        return "message:" + found
    return None
