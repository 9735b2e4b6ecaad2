"""The intake service: accepts grading jobs and answers their status."""

from __future__ import annotations

from flask import Flask

from services.intake import admin
from services.intake.client_auth import ApiKeyAuthenticator
from services.intake.routes import bp
from shared.bootstrap import Adapters, build_adapters, build_clock
from shared.config.settings import Settings
from shared.http.health import register_health
from shared.http.problems import register_error_handlers
from shared.http.tracing import register_trace_context
from shared.logs import configure_logging
from shared.ports import Clock
from shared.service_layer.intake import IntakeService

MAX_BODY_BYTES = 160 * 1024


def create_app(
    settings: Settings | None = None,
    adapters: Adapters | None = None,
    clock: Clock | None = None,
) -> Flask:
    """Build the intake app; gunicorn calls this with no arguments."""
    settings = settings or Settings()
    configure_logging("intake", settings.log_level)
    adapters = adapters or build_adapters(settings)
    app = Flask(__name__)
    app.config.update(MAX_CONTENT_LENGTH=MAX_BODY_BYTES, RETRY_AFTER_S=settings.retry_after_s)
    app.extensions["gradeq.client_auth"] = ApiKeyAuthenticator(settings.client_key_map())
    app.extensions["gradeq.intake"] = IntakeService(
        adapters.store, adapters.queue, adapters.publisher, clock or build_clock()
    )
    register_error_handlers(app)
    register_trace_context(app, settings.project_id)
    register_health(app, [("store", adapters.store.ping), ("queue", adapters.queue.ping)])
    app.register_blueprint(bp)
    admin.init_app(app, settings, adapters, clock or build_clock())
    return app
