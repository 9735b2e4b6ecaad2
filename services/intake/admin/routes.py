"""HTTP handlers of the admin API: operator credential first, then the service."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request

from services.intake.admin.auth import OperatorAuthenticator
from services.intake.admin.views import admin_job_view, decode_cursor, encode_cursor
from shared.domain.errors import ValidationFailed
from shared.domain.status import JobStatus
from shared.ports import JobFilter
from shared.service_layer.admin import MAX_PAGE, AdminService, JobPage
from shared.service_layer.queue_health import HealthQuery, QueueHealth

api = Blueprint("admin_api", __name__, url_prefix="/admin/v1")

DEFAULT_PAGE = 50
MAX_WINDOW = timedelta(hours=24)


@api.before_request
def _authenticate() -> None:
    auth: OperatorAuthenticator = current_app.extensions["gradeq.operator_auth"]
    request.environ["gradeq.operator"] = auth.operator()


def _operator() -> str:
    operator: str = request.environ["gradeq.operator"]
    return operator


def _service() -> AdminService:
    service: AdminService = current_app.extensions["gradeq.admin"]
    return service


def _invalid(field: str, message: str) -> ValidationFailed:
    return ValidationFailed(f"{field}: {message}", errors=[{"field": field, "message": message}])


def _moment(args: dict[str, Any], name: str) -> datetime | None:
    text = args.get(name)
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError as exc:
        raise _invalid(name, "expected an ISO 8601 date-time") from exc
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _int(args: dict[str, Any], name: str, default: int, low: int, high: int) -> int:
    raw = args.get(name, default)
    try:
        value = int(raw)
    except (TypeError, ValueError) as exc:
        raise _invalid(name, "expected an integer") from exc
    if not low <= value <= high:
        raise _invalid(name, f"expected {low}..{high}")
    return value


def _filter(args: dict[str, Any], *, status: bool = True) -> JobFilter:
    state = args.get("status") if status else None
    if state is not None and state not in JobStatus.__members__:
        raise _invalid("status", f"expected one of {', '.join(JobStatus)}")
    return JobFilter(
        status=JobStatus(state) if state else None,
        client_id=args.get("client") or None,
        assignment_id=args.get("assignment") or None,
        created_from=_moment(args, "created_from"),
        created_to=_moment(args, "created_to"),
    )


def _page(page: JobPage, *, detail: bool = False) -> Response:
    return jsonify(
        {
            "jobs": [admin_job_view(j, detail=detail) for j in page.jobs],
            "next_cursor": encode_cursor(page.next_cursor),
        }
    )


@api.get("/jobs")
def list_jobs() -> Response:
    args = request.args.to_dict()
    limit = _int(args, "limit", DEFAULT_PAGE, 1, MAX_PAGE)
    return _page(_service().list_jobs(_filter(args), limit, decode_cursor(args.get("cursor"))))


@api.get("/jobs/<job_id>")
def get_job(job_id: str) -> Response:
    return jsonify(admin_job_view(_service().get(job_id), detail=True))


@api.get("/dead-letters")
def dead_letters() -> Response:
    args = request.args.to_dict()
    limit = _int(args, "limit", DEFAULT_PAGE, 1, MAX_PAGE)
    page = _service().dead_letters(
        _filter(args, status=False), limit, decode_cursor(args.get("cursor"))
    )
    return _page(page, detail=True)


def _body() -> dict[str, Any]:
    body = request.get_json(silent=True) if request.content_length else {}
    if not isinstance(body, dict):
        raise _invalid("", "the body must be a JSON object")
    return body


@api.post("/jobs/<job_id>/replay")
def replay_job(job_id: str) -> Response:
    body = _body()
    generation = body.get("generation")
    if generation is not None and (type(generation) is not int or generation < 0):
        raise _invalid("generation", "expected the job's generation, an integer >= 0")
    outcome = _service().replay(job_id, _operator(), generation)
    return jsonify({"replayed": outcome.replayed, "job": admin_job_view(outcome.job, detail=True)})


@api.post("/dead-letters/replay")
def replay_dead_letters() -> Response:
    body = {k: v for k, v in _body().items() if v is not None}
    limit = _int(body, "limit", MAX_PAGE, 1, MAX_PAGE)
    outcome = _service().replay_failed(_filter(body, status=False), _operator(), limit)
    return jsonify({"replayed": outcome.replayed, "skipped": outcome.skipped})


@api.post("/jobs/<job_id>/cancel")
def cancel_job(job_id: str) -> Response:
    return jsonify(admin_job_view(_service().cancel(job_id), detail=True))


@api.get("/queue-health")
def queue_health() -> Response:
    args = request.args.to_dict()
    minutes = _int(args, "window_minutes", 60, 1, int(MAX_WINDOW.total_seconds() // 60))
    health: QueueHealth = current_app.extensions["gradeq.queue_health"]
    return jsonify(health.compute(HealthQuery(window=timedelta(minutes=minutes))))
