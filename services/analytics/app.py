"""The analytics subscriber: records every GradingCompleted and serves simple stats.

The stats endpoints answer an operator key (every client's records) or an API key of a
client named in GRADEQ_ANALYTICS_READERS (that client's records only); a credential
refused GRADEQ_AUTH_FAILURE_BURST times is answered 429 until it earns another try.

    gunicorn --bind :$PORT --workers 1 --threads 8 --timeout 0 \\
        'services.analytics.app:create_app()'
"""

from __future__ import annotations

from flask import Blueprint, Flask, Response, jsonify

from services.analytics.readers import Reader, ReaderAuthenticator
from services.analytics.recorder import SUBSCRIBER, public_record, record_event
from services.analytics.stats import summarize, usage_totals
from shared.bootstrap import adapter_family, build_clock
from shared.codecs.push_envelope import ReceivedEvent
from shared.config.settings import Settings
from shared.domain.errors import GradeqError
from shared.http.client_keys import ApiKeyAuthenticator
from shared.http.failed_auth import FailedAuthLimiter, client_address
from shared.http.problems import register_error_handlers
from shared.http.push_auth import build_verifier
from shared.http.subscriber import (
    push_blueprint,
    record_malformed,
    register_subscriber_health,
)
from shared.http.tracing import register_trace_context
from shared.logs import configure_logging
from shared.ports import ApiKeyStore, Clock, EventRecords, ProcessedEvents


class StatsUnavailable(GradeqError):
    slug = "stats-unavailable"
    title = "Statistics are not served by this deployment"
    status = 501


def _stats_blueprint(records: EventRecords | None, readers: ReaderAuthenticator) -> Blueprint:
    blueprint = Blueprint("stats", __name__, url_prefix="/v1")

    def _visible() -> list[dict[str, object]]:
        reader: Reader = readers.reader()
        if records is None:
            raise StatsUnavailable("this store cannot list records; query BigQuery instead")
        return [public_record(r) for r in reader.visible(records.records(SUBSCRIBER))]

    @blueprint.get("/stats")
    def stats() -> Response:
        return jsonify(summarize(_visible()))

    @blueprint.get("/usage")
    def usage() -> Response:
        return jsonify(usage_totals(_visible()))

    @blueprint.get("/events/<job_id>")
    def events_of_job(job_id: str) -> Response:
        found = [r for r in _visible() if r.get("job_id") == job_id]
        return jsonify(job_id=job_id, events=found)

    return blueprint


def create_app(
    settings: Settings | None = None,
    processed: ProcessedEvents | None = None,
    records: EventRecords | None = None,
    api_keys: ApiKeyStore | None = None,
    clock: Clock | None = None,
) -> Flask:
    """Build the analytics app; both stores come from the settings unless `processed` is given."""
    settings = settings or Settings()
    configure_logging("analytics", settings.log_level)
    verifier = build_verifier(settings)
    family = adapter_family(settings)
    if processed is None:
        processed, records = family.processed_events(), family.event_records()
    clock = clock or build_clock()
    failures = FailedAuthLimiter(
        settings.auth_failure_burst,
        settings.auth_failure_rate_per_s,
        clock,
        lambda: client_address(settings.trusted_proxy_hops),
    )
    readers = ReaderAuthenticator(
        settings.operator_key_map(),
        lambda: ApiKeyAuthenticator(api_keys or family.api_key_store(), clock),
        settings.analytics_reader_set(),
        failures,
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
