"""HTTP handlers of the worker: the Cloud Tasks target and the recovery sweep."""

from __future__ import annotations

import logging
from collections.abc import Callable

from flask import Blueprint, Response, current_app, jsonify, request

from shared.logs import job_context
from shared.service.recovery import RecoveryService
from shared.service.worker import Delivery, Verdict, WorkerService

log = logging.getLogger(__name__)


def build_blueprint(push_check: Callable[[], None]) -> Blueprint:
    """The /tasks endpoints, each behind the push token check."""
    bp = Blueprint("tasks", __name__, url_prefix="/tasks")
    bp.before_request(push_check)
    bp.add_url_rule("/grade", view_func=grade, methods=["POST"])
    bp.add_url_rule("/recover", view_func=recover, methods=["POST"])
    return bp


def _int_header(name: str) -> int:
    value = request.headers.get(name, "0")
    return int(value) if value.isdigit() else 0


def grade() -> Response:
    payload = request.get_json(silent=True)
    if not isinstance(payload, dict) or set(payload) != {"job_id"}:
        payload = {}
    job_id = payload.get("job_id")
    if not isinstance(job_id, str) or not job_id:
        # Retrying a malformed task cannot help: acknowledge it so the queue drops it.
        log.error("malformed task body; dropping the task")
        return jsonify(dropped='the body must be {"job_id": "..."}')
    delivery = Delivery(
        job_id=job_id,
        task_name=request.headers.get("X-CloudTasks-TaskName", ""),
        retry_count=_int_header("X-CloudTasks-TaskRetryCount"),
        execution_count=_int_header("X-CloudTasks-TaskExecutionCount"),
    )
    with job_context(job_id):
        log.info(
            "task delivered",
            extra={"retry_count": delivery.retry_count, "task_name": delivery.task_name},
        )
    service: WorkerService = current_app.extensions["gradeq.worker"]
    result = service.handle(delivery)
    body = {"job_id": job_id, "status": result.job.status.value if result.job else None}
    response = jsonify(body)
    if result.verdict is Verdict.RETRY:
        # 503 asks Cloud Tasks to back off; Retry-After passes on the provider's hint.
        response.status_code = 503
        if result.retry_after_s is not None:
            response.headers["Retry-After"] = str(max(1, round(result.retry_after_s)))
    return response


def recover() -> Response:
    service: RecoveryService = current_app.extensions["gradeq.recovery"]
    return jsonify(service.sweep().as_dict())
