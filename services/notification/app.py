"""The notification subscriber: signed webhooks to clients for each GradingCompleted and
each version of a posted grade (GradePosted).

    gunicorn --bind :$PORT --workers 1 --threads 8 --timeout 0 \\
        'services.notification.app:create_app()'
"""

from __future__ import annotations

from flask import Flask

from services.notification.client_secrets import ClientSecrets
from services.notification.notifier import SUBSCRIBER, Notifier
from services.notification.sealing import Sealer
from services.notification.webhook import WebhookSender
from shared.bootstrap import adapter_family, build_clock
from shared.codecs.push_envelope import ReceivedEvent
from shared.config.settings import Settings
from shared.domain.events import GradePosted
from shared.http.callback_guard import CallbackGuard
from shared.http.problems import register_error_handlers
from shared.http.push_auth import build_verifier
from shared.http.subscriber import (
    push_blueprint,
    record_malformed,
    register_subscriber_health,
)
from shared.http.tracing import register_trace_context
from shared.logs import configure_logging
from shared.ports import JobStore, ProcessedEvents, WebhookSecretStore


def create_app(
    settings: Settings | None = None,
    processed: ProcessedEvents | None = None,
    guard: CallbackGuard | None = None,
    jobs: JobStore | None = None,
    webhook_secrets: WebhookSecretStore | None = None,
) -> Flask:
    """Build the notification app; the stores not given come from the settings."""
    settings = settings or Settings()
    configure_logging("notification", settings.log_level)
    sealer = Sealer.from_setting(settings.webhook_secrets_key.get_secret_value())
    guard = guard or CallbackGuard(
        allow_loopback=settings.callback_allow_loopback, allowed_ports=settings.callback_port_set()
    )
    sender = WebhookSender(
        settings.webhook_timeout_s, guard, extra_ca_bundle=settings.webhook_ca_bundle
    )
    verifier = build_verifier(settings)
    family = adapter_family(settings)
    processed = processed or family.processed_events()
    secrets = ClientSecrets(webhook_secrets or family.webhook_secret_store(), sealer, build_clock())
    notifier = Notifier(processed, jobs or family.job_store(), secrets, sender)

    def handle(received: ReceivedEvent) -> None:
        notifier.handle(received.event)

    def handle_posted(event: GradePosted) -> None:
        notifier.handle(event)

    app = Flask(__name__)
    register_error_handlers(app)
    register_trace_context(app, settings.project_id)
    register_subscriber_health(app, processed)
    app.register_blueprint(
        push_blueprint(
            verifier,
            handle,
            record_malformed(processed, SUBSCRIBER),
            handle_posted=handle_posted,
        )
    )
    return app
