"""The analytics subscriber: records every GradingCompleted and serves simple stats.

The stats endpoints answer only an API key of a client named in GRADEQ_ANALYTICS_READERS.

    gunicorn --bind :$PORT --workers 1 --threads 8 --timeout 0 \\
        'services.analytics.app:create_app()'
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from flask import Blueprint, Flask, Response, jsonify

from services.analytics.recorder import SUBSCRIBER, record_event
from services.analytics.stats import summarize, usage_totals
from shared.bootstrap import adapter_family, build_clock
from shared.codecs.push_envelope import ReceivedEvent
from shared.config.settings import Settings
from shared.domain.errors import GradeqError
from shared.http.client_keys import ApiKeyAuthenticator, bearer_credential
from shared.http.problems import register_error_handlers
from shared.http.push_auth import build_verifier
from shared.http.subscriber import (
    push_blueprint,
    record_malformed,
    register_subscriber_health,
)
from shared.http.tracing import register_trace_context
from shared.logs import configure_logging
from shared.ports import ApiKeyStore, EventRecords, ProcessedEvents


class NotAReader(GradeqError):
    slug = "not-an-analytics-reader"
    title = "This client may not read analytics"
    status = 403


def require_reader(
    keys: Callable[[], ApiKeyAuthenticator], readers: frozenset[str]
) -> Callable[[], None]:
    """A before-request check: an API key of a client listed in GRADEQ_ANALYTICS_READERS.

    The key store is opened on the first read, so pushes never wait for it.
    """
    authenticator = cache(keys)

    def _check() -> None:
        client_id = authenticator().client_for(bearer_credential())
        if client_id not in readers:
            raise NotAReader(f"client {client_id} is not in GRADEQ_ANALYTICS_READERS")

    return _check


class StatsUnavailable(GradeqError):
    slug = "stats-unavailable"
    title = "Statistics are not served by this deployment"
    status = 501


def _stats_blueprint(records: EventRecords | None, check: Callable[[], None]) -> Blueprint:
    blueprint = Blueprint("stats", __name__, url_prefix="/v1")
    blueprint.before_request(check)

    def _records() -> EventRecords:
        if records is None:
            raise StatsUnavailable("this store cannot list records; query BigQuery instead")
        return records

    @blueprint.get("/stats")
    def stats() -> Response:
        return jsonify(summarize(_records().records(SUBSCRIBER)))

    @blueprint.get("/usage")
    def usage() -> Response:
        return jsonify(usage_totals(_records().records(SUBSCRIBER)))

    @blueprint.get("/events/<job_id>")
    def events_of_job(job_id: str) -> Response:
        found = [r for r in _records().records(SUBSCRIBER) if r.get("job_id") == job_id]
        return jsonify(job_id=job_id, events=found)

    return blueprint


def create_app(
    settings: Settings | None = None,
    processed: ProcessedEvents | None = None,
    records: EventRecords | None = None,
    api_keys: ApiKeyStore | None = None,
) -> Flask:
    """Build the analytics app; both stores come from the settings unless `processed` is given."""
    settings = settings or Settings()
    configure_logging("analytics", settings.log_level)
    verifier = build_verifier(settings)
    family = adapter_family(settings)
    if processed is None:
        processed, records = family.processed_events(), family.event_records()
    readers = require_reader(
        lambda: ApiKeyAuthenticator(api_keys or family.api_key_store(), build_clock()),
        settings.analytics_reader_set(),
    )

    def handle(received: ReceivedEvent) -> None:
        record_event(processed, received)

    app = Flask(__name__)
    register_error_handlers(app)
    register_trace_context(app, settings.project_id)
    register_subscriber_health(app, processed)
    app.register_blueprint(
        push_blueprint(verifier, handle, record_malformed(processed, SUBSCRIBER))
    )
    app.register_blueprint(_stats_blueprint(records, readers))
    return app
