"""The worker service: the Cloud Tasks HTTP target that grades jobs."""

from __future__ import annotations

from datetime import timedelta

from flask import Flask

from services.worker.routes import build_blueprint
from shared.bootstrap import Adapters, build_adapters, build_clock, build_grader
from shared.config.settings import Settings
from shared.http.health import register_health
from shared.http.problems import register_error_handlers
from shared.http.push_auth import build_verifier, require_push_token
from shared.http.tracing import register_trace_context
from shared.logs import configure_logging
from shared.ports import Clock, Grader
from shared.service_layer.recovery import RecoveryService
from shared.service_layer.worker import WorkerService


def create_app(
    settings: Settings | None = None,
    adapters: Adapters | None = None,
    grader: Grader | None = None,
    clock: Clock | None = None,
) -> Flask:
    """Build the worker app; gunicorn calls this with no arguments."""
    settings = settings or Settings()
    configure_logging("worker", settings.log_level)
    adapters = adapters or build_adapters(settings)
    clock = clock or build_clock()
    queue_config = settings.queue_config()
    app = Flask(__name__)
    app.extensions["gradeq.worker"] = WorkerService(
        store=adapters.store,
        publisher=adapters.publisher,
        grader=grader or build_grader(settings),
        clock=clock,
        retry=queue_config.retry_config,
        grader_timeout_s=settings.grader_timeout_s,
        lease_margin_s=settings.lease_margin_s,
    )
    app.extensions["gradeq.recovery"] = RecoveryService(
        store=adapters.store,
        queue=adapters.queue,
        publisher=adapters.publisher,
        clock=clock,
        queue_config=queue_config,
        lease=timedelta(seconds=settings.grader_timeout_s + settings.lease_margin_s),
    )
    register_error_handlers(app)
    register_trace_context(app, settings.project_id)
    register_health(app, [("store", adapters.store.ping), ("bus", adapters.publisher.ping)])
    app.register_blueprint(build_blueprint(require_push_token(build_verifier(settings))))
    return app
