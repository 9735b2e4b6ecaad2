"""The operator's side of intake: the admin API and the dashboard, under /admin.

Both need an operator credential (GRADEQ_OPERATOR_KEYS), never a client key.
"""

from __future__ import annotations

from functools import cache

from flask import Flask

from services.intake.admin.assignments import admin_assignments
from services.intake.admin.auth import OperatorAuthenticator
from services.intake.admin.budgets import budgets_api
from services.intake.admin.dashboard import page
from services.intake.admin.gradebooks import gradebooks_api
from services.intake.admin.lanes import lanes_api
from services.intake.admin.quota import quota_api
from services.intake.admin.routes import api
from shared.bootstrap import Adapters, adapter_family
from shared.bootstrap.graders import QuotaReport
from shared.config.settings import Settings
from shared.ports import Clock
from shared.service_layer.admin import AdminService
from shared.service_layer.assignment_completion import AssignmentCompletion
from shared.service_layer.lanes import LaneService
from shared.service_layer.queue_health import QueueHealth


def init_app(app: Flask, settings: Settings, adapters: Adapters, clock: Clock) -> None:
    """Register the admin API and dashboard on the intake app."""
    app.extensions["gradeq.operator_auth"] = OperatorAuthenticator(
        settings.operator_key_map(), app.extensions.get("gradeq.failed_auth")
    )
    completion = (
        AssignmentCompletion(adapters.assignments, adapters.publisher, clock)
        if adapters.assignments is not None
        else None
    )
    app.extensions["gradeq.admin"] = AdminService(
        adapters.store,
        adapters.queue,
        adapters.publisher,
        clock,
        on_final=completion.on_final if completion else None,
    )
    app.extensions["gradeq.queue_health"] = QueueHealth(adapters.store, clock)
    app.extensions["gradeq.lanes"] = LaneService(
        adapters.store,
        adapters.queue,
        adapters.publisher,
        clock,
        settings.queues(),
        settings.lane_policy().default,
        on_final=completion.on_final if completion else None,
    )
    app.extensions["gradeq.budgets"] = adapters.budgets
    app.extensions["gradeq.budget_clock"] = clock
    # Built on first use: the intake starts without touching the gradebook's store.
    app.extensions.setdefault(
        "gradeq.gradebook_marks", cache(lambda: adapter_family(settings).gradebook_marks())
    )
    app.register_blueprint(api)
    app.register_blueprint(lanes_api)
    app.register_blueprint(budgets_api)
    app.extensions["gradeq.quota"] = QuotaReport(settings)
    app.register_blueprint(quota_api)
    app.register_blueprint(gradebooks_api)
    app.register_blueprint(page)
    if adapters.assignments is not None:
        app.extensions["gradeq.admin_assignments"] = adapters.assignments
        app.register_blueprint(admin_assignments)
