"""HTTP handlers of the intake API: validate, call the service, map the result."""

from __future__ import annotations

import dataclasses
import re

from flask import Blueprint, Response, current_app, jsonify, request, url_for

from services.intake.assignments.routes import submit_to_assignment
from services.intake.auth.clients import ClientAuthenticator
from services.intake.jobs.schemas import parse_grading_request, parse_list_query
from services.intake.jobs.views import JobPage, job_model, job_view
from services.intake.limits.body import read_json_body
from services.intake.limits.rate_limit import rate_limit_headers, spend_submissions
from services.intake.uploads.routes import uploads_service
from shared.domain.authorization import (
    Action,
    AssignmentRequired,
    Forbidden,
    Principal,
    SetByTheSchool,
)
from shared.domain.job import Job
from shared.http.callback_guard import CallbackGuard
from shared.http.errors import IdempotencyKeyInvalid, UnsupportedMediaType
from shared.service_layer.intake import IntakeService

bp = Blueprint("grading_jobs", __name__, url_prefix="/v1/grading-jobs")

# RFC 9110 visible ASCII: the characters a client can send in the header unescaped.
_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")
#: What a student's practice job may not set: the school's lane and webhook, review rules.
STUDENT_PRACTICE_REFUSED = ("lane", "callback_url", "review", "release")


def _service() -> IntakeService:
    service: IntakeService = current_app.extensions["gradeq.intake"]
    return service


def _principal() -> Principal:
    auth: ClientAuthenticator = current_app.extensions["gradeq.client_auth"]
    return auth.principal()


def _respond(job: Job, status: int) -> Response:
    response = jsonify(job_view(job))
    response.status_code = status
    response.headers["Location"] = url_for("grading_jobs.get_job", job_id=job.id)
    if not job.status.is_final:
        response.headers["Retry-After"] = str(current_app.config["RETRY_AFTER_S"])
    return response


bp.after_request(rate_limit_headers)


@bp.post("")
def create_job() -> Response:
    principal = _principal()
    spend_submissions(principal.school)
    if request.mimetype != "application/json":
        raise UnsupportedMediaType(f"got Content-Type {request.mimetype or 'none'!r}")
    key = request.headers.get("Idempotency-Key")
    if key is None or not _KEY.match(key):
        raise IdempotencyKeyInvalid("send an Idempotency-Key of 1-255 visible ASCII characters")
    payload = read_json_body(current_app.config["MAX_CONTENT_LENGTH"])
    # An answer to one of the school's assignments takes the assignment's rubric.
    submission = submit_to_assignment(principal, payload)
    if submission is None:
        grading_request = parse_grading_request(_own_job(principal, payload))
        if not principal.may(Action.JOB_CONFIGURE):
            grading_request = dataclasses.replace(
                grading_request, practice=True, student_id=principal.author
            )
        if grading_request.callback_url is not None:
            guard: CallbackGuard = current_app.extensions["gradeq.callback_guard"]
            guard.check(grading_request.callback_url)
        if grading_request.files:
            checked = uploads_service().verify(
                principal.school, grading_request.files, grading_request.student_id, principal
            )
            grading_request = dataclasses.replace(grading_request, files=checked)
        submission = _service().submit(principal, key, grading_request)
    response = _respond(submission.job, 202)
    if not submission.created:
        response.headers["Idempotent-Replayed"] = "true"
    return response


def _own_job(principal: Principal, payload: object) -> object:
    """A job that brings its own rubric: the school's staff send it; a student only a
    practice job, where the school allows them, and never the school's lane or callback."""
    if principal.may(Action.JOB_CONFIGURE):
        return payload
    if not principal.may(Action.JOB_PRACTICE):
        raise Forbidden(f"a {principal.role.value} sends no grading jobs")
    if principal.school not in _practice_schools():
        raise AssignmentRequired(
            "name one of the school's assignments; this school takes no practice jobs"
        )
    sent = payload if isinstance(payload, dict) else {}
    refused = [f for f in (*STUDENT_PRACTICE_REFUSED, "assignment_id", "student_id") if f in sent]
    if refused:
        raise SetByTheSchool(
            f"a practice job may not set {', '.join(refused)}", fields=sorted(refused)
        )
    return payload


def _practice_schools() -> frozenset[str]:
    schools: frozenset[str] = current_app.config.get("PRACTICE_CLIENTS", frozenset())
    return schools


@bp.get("")
def list_jobs() -> Response:
    query = parse_list_query(request.args.to_dict())
    page = _service().list(
        _principal(), query.limit, query.status, query.submission_id, query.cursor
    )
    body = JobPage(jobs=[job_model(j) for j in page.jobs], next_cursor=page.next_cursor)
    return jsonify(body.model_dump(mode="json"))


@bp.get("/<job_id>")
def get_job(job_id: str) -> Response:
    return _respond(_service().get(_principal(), job_id), 200)


@bp.post("/<job_id>/cancel")
def cancel_job(job_id: str) -> Response:
    return _respond(_service().cancel(_principal(), job_id), 200)
