"""POST /v1/uploads: a short-lived signed URL for one direct PUT of an answer file."""

from __future__ import annotations

from typing import Annotated

from flask import Blueprint, Response, current_app, jsonify, request
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from services.intake.auth.clients import ClientAuthenticator
from services.intake.jobs.schemas import _failed
from services.intake.limits.body import read_json_body
from services.intake.limits.rate_limit import SubmissionRateLimiter
from shared.domain.authorization import Action, SetByTheSchool, require
from shared.domain.errors import ValidationFailed
from shared.http.errors import UnsupportedMediaType
from shared.service_layer.uploads import UploadService

bp = Blueprint("uploads", __name__, url_prefix="/v1/uploads")
_BODY_LIMIT = 4 * 1024


class UploadIn(BaseModel):
    """POST /v1/uploads body: what will be PUT."""

    model_config = ConfigDict(extra="forbid", strict=True)

    content_type: Annotated[str, StringConstraints(min_length=1, max_length=100)]
    size: int = Field(gt=0, description="exact size in bytes of the file to be PUT")
    student_id: Annotated[str, StringConstraints(min_length=1, max_length=256)] | None = Field(
        default=None,
        description="the student the file is for: only their submissions may name it, and "
        "DELETE /v1/students/{id} erases it, named by a job or not",
    )


class UploadOut(BaseModel):
    """Where to PUT the file, with which headers, until when; name `upload_id` in a job."""

    upload_id: str
    upload_url: str
    method: str = "PUT"
    headers: dict[str, str]
    expires_at: str


def uploads_service() -> UploadService:
    service: UploadService = current_app.extensions["gradeq.uploads"]
    return service


@bp.post("")
def create_upload() -> Response:
    auth: ClientAuthenticator = current_app.extensions["gradeq.client_auth"]
    principal = auth.principal()
    require(principal, Action.UPLOAD_CREATE)
    # An upload belongs to the school (whoever in it sends it), as the jobs naming it do.
    client_id = principal.school
    # Each upload may store a file: its own bucket of tokens keeps storage bounded.
    limiter: SubmissionRateLimiter = current_app.extensions["gradeq.upload_rate_limiter"]
    limiter.take(client_id)
    if request.mimetype != "application/json":
        raise UnsupportedMediaType(f"got Content-Type {request.mimetype or 'none'!r}")
    payload = read_json_body(_BODY_LIMIT)
    if not isinstance(payload, dict):
        raise ValidationFailed(
            "the body must be a JSON object",
            errors=[{"field": "", "message": "expected an object"}],
        )
    try:
        body = UploadIn.model_validate(payload)
    except ValidationError as exc:
        raise _failed(exc, "invalid fields") from exc
    student_id = body.student_id
    if not principal.may(Action.JOB_CONFIGURE):
        # A student uploads for themselves: their submissions name it, their erasure takes it.
        if student_id not in (None, principal.author):
            raise SetByTheSchool("a student uploads for themselves", fields=["student_id"])
        student_id = principal.author
    created = uploads_service().create(
        client_id, body.content_type, body.size, student_id, principal.author
    )
    url = created.signed.url
    if url.startswith("/"):  # the embedded store's URL is served by this intake
        url = request.host_url.rstrip("/") + url
    out = UploadOut(
        upload_id=created.upload_id,
        upload_url=url,
        headers=created.signed.headers,
        expires_at=created.signed.expires_at.isoformat().replace("+00:00", "Z"),
    )
    response = jsonify(out.model_dump(mode="json"))
    response.status_code = 201
    return response
