"""The admin API's provider quota: each model's shared pool as the job store holds it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request

from services.intake.admin.auth import OperatorAuthenticator

quota_api = Blueprint("admin_quota", __name__, url_prefix="/admin/v1/quota")


@quota_api.before_request
def _authenticate() -> None:
    auth: OperatorAuthenticator = current_app.extensions["gradeq.operator_auth"]
    request.environ["gradeq.operator"] = auth.operator()


@quota_api.get("")
def pools() -> Response:
    """Per model: the limit (declared, or found by the adaptive controller), what the
    window holds per lane, the jobs waiting per lane, and the controller's last epoch."""
    report: Callable[[], list[dict[str, Any]]] = current_app.extensions["gradeq.quota"]
    return jsonify({"pools": report()})
