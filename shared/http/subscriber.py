"""Flask plumbing every event subscriber shares: the authenticated push route and probes.

A handler answers 2xx only after its work is durable; any error becomes a problem
document with a non-2xx status, and the bus (or Pub/Sub) redelivers with backoff.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import ExitStack

from flask import Blueprint, Flask, Response, g, request

from shared.codecs.push_envelope import ReceivedEvent, from_push_envelope
from shared.http.health import register_health
from shared.http.push_auth import PushVerifier, require_push_token
from shared.logs import job_context
from shared.ports import ProcessedEvents

PUSH_PATH = "/pubsub/push"
log = logging.getLogger(__name__)


def push_blueprint(verifier: PushVerifier, handle: Callable[[ReceivedEvent], None]) -> Blueprint:
    """Serve POST /pubsub/push: check the bearer token, decode the event, run `handle`."""
    blueprint = Blueprint("pubsub", __name__, url_prefix="/pubsub")
    blueprint.before_request(require_push_token(verifier))

    @blueprint.post("/push")
    def push() -> Response:
        received = from_push_envelope(request.get_json(silent=True))
        # Held until teardown, so the error handler's log line carries the job id too.
        g.job_context = ExitStack()
        g.job_context.enter_context(job_context(received.event.job_id))
        handle(received)
        return Response(status=204)

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
