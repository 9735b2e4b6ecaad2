"""The admin API's lanes: figures per lane, and pause, resume and purge (operator only)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request

from services.intake.admin.auth import OperatorAuthenticator
from shared.domain.errors import ValidationFailed
from shared.service_layer.lanes import LaneService

lanes_api = Blueprint("admin_lanes", __name__, url_prefix="/admin/v1/lanes")

MAX_WINDOW_MINUTES = 24 * 60
MAX_REASON = 500


@lanes_api.before_request
def _authenticate() -> None:
    auth: OperatorAuthenticator = current_app.extensions["gradeq.operator_auth"]
    request.environ["gradeq.operator"] = auth.operator()


def _operator() -> str:
    operator: str = request.environ["gradeq.operator"]
    return operator


def _service() -> LaneService:
    service: LaneService = current_app.extensions["gradeq.lanes"]
    return service


def _state(lane: str) -> Response:
    return jsonify({"lane": lane, "paused": _service().is_paused(lane)})


@lanes_api.get("")
def list_lanes() -> Response:
    raw = request.args.get("window_minutes", "60")
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_WINDOW_MINUTES:
        message = f"expected 1..{MAX_WINDOW_MINUTES}"
        raise ValidationFailed(
            f"window_minutes: {message}", errors=[{"field": "window_minutes", "message": message}]
        )
    figures = _service().figures(timedelta(minutes=int(raw)))
    return jsonify({"lanes": figures})


@lanes_api.post("/<lane>/pause")
def pause(lane: str) -> Response:
    _service().pause(lane, _operator())
    return _state(lane)


@lanes_api.post("/<lane>/resume")
def resume(lane: str) -> Response:
    _service().resume(lane, _operator())
    return _state(lane)


@lanes_api.post("/<lane>/purge")
def purge(lane: str) -> Response:
    body: Any = request.get_json(silent=True) if request.content_length else {}
    reason = body.get("reason", "") if isinstance(body, dict) else None
    if not isinstance(reason, str) or len(reason) > MAX_REASON:
        message = f"expected a string of at most {MAX_REASON} characters"
        raise ValidationFailed(
            f"reason: {message}", errors=[{"field": "reason", "message": message}]
        )
    return jsonify(_service().purge(lane, _operator(), reason).as_dict())
