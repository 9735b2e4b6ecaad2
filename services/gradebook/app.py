"""The gradebook subscriber: each posted grade into the school's LMS gradebook.

    gunicorn --bind :$PORT --workers 1 --threads 8 --timeout 0 \\
        'services.gradebook.app:create_app()'

POST /pubsub/push takes GradePosted events (the subscription's filter admits only that
type; any other type is acknowledged unread). Each school's gradebook health and the
grades an LMS refused are in the store, shown by the intake's admin API
(GET /admin/v1/gradebooks).
"""

from __future__ import annotations

import json
import logging
from datetime import timedelta

from flask import Blueprint, Flask, Response, request

from services.gradebook.claims import ItemClaims
from services.gradebook.connections import LmsConnections, StaticConnections, load_connections
from services.gradebook.event import (
    GRADE_POSTED_TYPE,
    InvalidGradePosted,
    from_push,
    push_event_type,
)
from services.gradebook.lti import LtiAgsWriter
from services.gradebook.settings import GradebookSettings
from services.gradebook.subscriber import Connections, GradebookSubscriber
from services.notification.sealing import Sealer
from shared.bootstrap import AdapterFamily, adapter_family, build_clock
from shared.config.settings import Settings
from shared.domain.gradebook import MarkKey
from shared.http.health import register_health
from shared.http.problems import register_error_handlers
from shared.http.push_auth import PushVerifier, build_verifier, require_push_token
from shared.http.subscriber import record_malformed_message
from shared.http.tracing import register_trace_context
from shared.logs import configure_logging, job_context
from shared.ports import Clock, GradebookMarks, ProcessedEvents
from shared.service_layer.lti_keys import LtiToolKeys

SUBSCRIBER = "gradebook"
log = logging.getLogger(__name__)


def _push_blueprint(
    verifier: PushVerifier, subscriber: GradebookSubscriber, processed: ProcessedEvents
) -> Blueprint:
    blueprint = Blueprint("pubsub", __name__, url_prefix="/pubsub")
    blueprint.before_request(require_push_token(verifier))

    @blueprint.post("/push")
    def push() -> Response:
        raw = request.get_data(cache=False)
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError):
            body = None
        found = push_event_type(body)
        if found is not None and found != GRADE_POSTED_TYPE:
            log.info("event of another type acknowledged", extra={"type": found})
            return Response(status=204)
        try:
            received = from_push(body)
        except InvalidGradePosted as exc:
            message = body.get("message") if isinstance(body, dict) else None
            message_id = message.get("messageId") if isinstance(message, dict) else None
            key = f"message:{message_id}" if isinstance(message_id, str) else "unidentified"
            record_malformed_message(processed, SUBSCRIBER, key, exc.detail, len(raw))
            return Response(status=204)
        with job_context(received.grade.job_id):
            outcome = subscriber.handle(received.grade)
            log.info(
                "push answered",
                extra={
                    "outcome": outcome.value,
                    "event_id": received.event_id,
                    "message_id": received.message_id,
                    "delivery_attempt": received.delivery_attempt,
                },
            )
        return Response(status=204)

    return blueprint


def create_app(
    settings: Settings | None = None,
    gradebook_settings: GradebookSettings | None = None,
    marks: GradebookMarks | None = None,
    connections: Connections | None = None,
    processed: ProcessedEvents | None = None,
    clock: Clock | None = None,
) -> Flask:
    """Build the gradebook app; what is not given comes from the settings."""
    settings = settings or Settings()
    gradebook_settings = gradebook_settings or GradebookSettings()
    configure_logging("gradebook", settings.log_level)
    verifier = build_verifier(settings)
    family = adapter_family(settings)
    marks = marks or family.gradebook_marks()
    processed = processed or family.processed_events()
    clock = clock or build_clock()
    if connections is None:
        # Where instances agree on the LMS items (course work, line items) they create.
        claims = ItemClaims(marks, clock, timedelta(seconds=gradebook_settings.lease_s))
        connections = load_connections(gradebook_settings, claims=claims)
        if settings.lti_secrets_key.get_secret_value():
            connections = _with_lti(connections, settings, family, clock, claims)
    subscriber = GradebookSubscriber(
        marks,
        connections,
        clock,
        lease=timedelta(seconds=gradebook_settings.lease_s),
    )
    app = Flask(__name__)
    app.extensions["gradeq.gradebook"] = subscriber
    register_error_handlers(app)
    register_trace_context(app, settings.project_id)
    register_health(app, [("gradebook_marks", lambda: _probe(marks))])
    app.register_blueprint(_push_blueprint(verifier, subscriber, processed))
    return app


def _probe(marks: GradebookMarks) -> None:
    marks.mark(MarkKey("readyz", "probe", "probe"))


def _with_lti(
    configured: StaticConnections,
    settings: Settings,
    family: AdapterFamily,
    clock: Clock,
    claims: ItemClaims,
) -> LmsConnections:
    """Add the schools registered as LTI 1.3 platforms (GRADEQ_LTI_SECRETS_KEY unseals
    Gradeq's signing key for the platforms' token endpoints)."""
    store = family.lti_store()
    sealer = Sealer.from_setting(settings.lti_secrets_key.get_secret_value())
    keys = LtiToolKeys(store, sealer, clock)
    return LmsConnections(configured, store, LtiAgsWriter.on(store, keys, clock, claims))
