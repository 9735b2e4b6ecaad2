"""The operator's side of intake: the admin API and the dashboard, under /admin.

Both need an operator credential (GRADEQ_OPERATOR_KEYS), never a client key.
"""

from __future__ import annotations

from flask import Flask

from services.intake.admin.auth import OperatorAuthenticator
from services.intake.admin.dashboard import page
from services.intake.admin.lanes import lanes_api
from services.intake.admin.routes import api
from shared.bootstrap import Adapters
from shared.config.settings import Settings
from shared.ports import Clock
from shared.service_layer.admin import AdminService
from shared.service_layer.lanes import LaneService
from shared.service_layer.queue_health import QueueHealth


def init_app(app: Flask, settings: Settings, adapters: Adapters, clock: Clock) -> None:
    """Register the admin API and dashboard on the intake app."""
    app.extensions["gradeq.operator_auth"] = OperatorAuthenticator(settings.operator_key_map())
    app.extensions["gradeq.admin"] = AdminService(
        adapters.store, adapters.queue, adapters.publisher, clock
    )
    app.extensions["gradeq.queue_health"] = QueueHealth(adapters.store, clock)
    app.extensions["gradeq.lanes"] = LaneService(
        adapters.store,
        adapters.queue,
        adapters.publisher,
        clock,
        settings.queues(),
        settings.lane_policy().default,
    )
    app.register_blueprint(api)
    app.register_blueprint(lanes_api)
    app.register_blueprint(page)
