"""The analytics subscriber: records every GradingCompleted and serves simple stats.

    gunicorn --bind :$PORT --workers 1 --threads 8 --timeout 0 \\
        'services.analytics.app:create_app()'
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from flask import Blueprint, Flask, Response, jsonify

from services.analytics.recorder import SUBSCRIBER, record_event
from services.analytics.stats import summarize
from shared.bootstrap import build_adapters
from shared.domain.errors import GradeqError
from shared.events.envelope import ReceivedEvent
from shared.events.subscriber import (
    SubscriberAdapters,
    push_blueprint,
    register_subscriber_health,
)
from shared.http.problems import register_error_handlers
from shared.http.push_auth import build_verifier
from shared.logs import configure_logging
from shared.ports import ProcessedEvents
from shared.settings import Settings


@runtime_checkable
class EventRecords(Protocol):
    """A processed-events store that can also list what a subscriber recorded."""

    def records(self, subscriber: str) -> list[dict[str, Any]]: ...


class StatsUnavailable(GradeqError):
    slug = "stats-unavailable"
    title = "Statistics are not served by this deployment"
    status = 501


def _stats_blueprint(processed: ProcessedEvents) -> Blueprint:
    blueprint = Blueprint("stats", __name__, url_prefix="/v1")

    @blueprint.get("/stats")
    def stats() -> Response:
        if not isinstance(processed, EventRecords):
            raise StatsUnavailable("this store cannot list records; query BigQuery instead")
        return jsonify(summarize(processed.records(SUBSCRIBER)))

    @blueprint.get("/events/<job_id>")
    def events_of_job(job_id: str) -> Response:
        if not isinstance(processed, EventRecords):
            raise StatsUnavailable("this store cannot list records; query BigQuery instead")
        records = [r for r in processed.records(SUBSCRIBER) if r.get("job_id") == job_id]
        return jsonify(job_id=job_id, events=records)

    return blueprint


def create_app(
    settings: Settings | None = None, adapters: SubscriberAdapters | None = None
) -> Flask:
    """Build the analytics app; adapters come from the settings unless given."""
    settings = settings or Settings()
    configure_logging("analytics", settings.log_level)
    verifier = build_verifier(settings)
    processed = (adapters or build_adapters(settings)).processed

    def handle(received: ReceivedEvent) -> None:
        record_event(processed, received)

    app = Flask(__name__)
    register_error_handlers(app)
    register_subscriber_health(app, processed)
    app.register_blueprint(push_blueprint(verifier, handle))
    app.register_blueprint(_stats_blueprint(processed))
    return app
