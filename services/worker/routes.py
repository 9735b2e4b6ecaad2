"""HTTP handlers of the worker: the Cloud Tasks target and the recovery sweep."""

from __future__ import annotations

import logging
from collections.abc import Callable

from flask import Blueprint, Response, current_app, jsonify, request

from services.worker.replies import reply
from shared.codecs.task_body import MalformedTaskBody, decode_task_body
from shared.logs import job_context
from shared.service_layer.lanes import LaneService
from shared.service_layer.recovery import RecoveryService
from shared.service_layer.upload_expiry import UploadExpiry
from shared.service_layer.worker import DeliveryResult, TaskDelivery, Verdict, WorkerService

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
    try:
        job_id = decode_task_body(request.get_data(cache=False))
    except MalformedTaskBody as exc:
        # Retrying a malformed task cannot help: acknowledge it so the queue drops it.
        log.error("malformed task body; dropping the task", extra={"reason": exc.detail})
        return reply(None, DeliveryResult(Verdict.DROPPED, None, reason=exc))
    delivery = TaskDelivery(
        job_id=job_id,
        task_name=request.headers.get("X-CloudTasks-TaskName", ""),
        retry_count=_int_header("X-CloudTasks-TaskRetryCount"),
        queue=request.headers.get("X-CloudTasks-QueueName", ""),
    )
    with job_context(job_id):
        log.debug(
            "task delivered",
            extra={"retry_count": delivery.retry_count, "task_name": delivery.task_name},
        )
    service: WorkerService = current_app.extensions["gradeq.worker"]
    return reply(job_id, service.handle(delivery))


def recover() -> Response:
    service: RecoveryService = current_app.extensions["gradeq.recovery"]
    swept = service.sweep().as_dict()
    expiry: UploadExpiry | None = current_app.extensions.get("gradeq.upload_expiry")
    if expiry is not None:
        swept["uploads_expired"] = expiry.sweep()
    lanes: LaneService | None = current_app.extensions.get("gradeq.lanes")
    if lanes is not None:
        lanes.report()  # each lane's oldest job's age, for its alert
    return jsonify(swept)
