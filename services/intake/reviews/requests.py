"""HTTP handlers of regrade requests: a student asks about their grade, the school answers.

`POST /v1/grading-jobs/{id}/regrade-request` (a signed-in student, on their own grade)
and `POST /v1/reviews/{id}/request` (the school's teachers, reviewers and server key);
the policy (shared/domain/authorization.py) decides who may.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from flask import Blueprint, Response, current_app, jsonify
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from services.intake.assignments.schemas import parse
from services.intake.auth.clients import ClientAuthenticator
from services.intake.jobs.views import job_view
from services.intake.limits.body import read_json_body
from services.intake.reviews.routes import detail_view
from shared.domain.authorization import Action, Principal
from shared.domain.review import RequestAnswer
from shared.service_layer.regrade_requests import Change, RegradeRequests

bp = Blueprint("regrade_requests", __name__, url_prefix="/v1")

Reason = Annotated[str, StringConstraints(min_length=1, max_length=2000, strip_whitespace=True)]


class RegradeRequestIn(BaseModel):
    """POST /v1/grading-jobs/{id}/regrade-request body: why the grade should be looked at."""

    model_config = ConfigDict(extra="forbid", strict=True)

    reason: Reason


class RequestAnswerIn(BaseModel):
    """POST /v1/reviews/{id}/request body: keep the grade, or change it; with a reason."""

    model_config = ConfigDict(extra="forbid", strict=True)

    answer: Literal["keep", "change"]
    reason: Reason
    score: float | None = Field(default=None, ge=0)
    criteria: list[dict[str, Any]] | None = Field(default=None, max_length=100)
    feedback: Annotated[str, StringConstraints(min_length=1, max_length=8000)] | None = None

    @model_validator(mode="after")
    def _change_has_score(self) -> RequestAnswerIn:
        if self.answer == "change" and self.score is None:
            raise ValueError("a change needs a score")
        if self.answer == "keep" and (
            self.score is not None or self.criteria is not None or self.feedback is not None
        ):
            raise ValueError("a keep takes no score, criteria or feedback")
        return self


def _requests() -> RegradeRequests:
    service: RegradeRequests = current_app.extensions["gradeq.regrade_requests"]
    return service


def _principal() -> Principal:
    auth: ClientAuthenticator = current_app.extensions["gradeq.client_auth"]
    return auth.principal()


def _body() -> object:
    return read_json_body(current_app.config["MAX_CONTENT_LENGTH"])


@bp.post("/grading-jobs/<job_id>/regrade-request")
def request_regrade(job_id: str) -> Response:
    principal = _principal()
    _requests().job(principal, job_id, Action.REGRADE_REQUEST)  # 404 / 403 before the body
    body: RegradeRequestIn = parse(RegradeRequestIn, _body())
    job = _requests().request(principal, job_id, body.reason)
    response = jsonify(job_view(job))
    response.status_code = 201
    return response


@bp.post("/reviews/<job_id>/request")
def answer_request(job_id: str) -> Response:
    principal = _principal()
    _requests().job(principal, job_id, Action.REGRADE_ANSWER)  # 404 / 403 before the body
    body: RequestAnswerIn = parse(RequestAnswerIn, _body())
    change = None
    if body.answer == "change":
        assert body.score is not None
        change = Change(
            body.score,
            tuple(body.criteria) if body.criteria is not None else None,
            body.feedback,
        )
    job = _requests().answer(principal, job_id, RequestAnswer(body.answer), body.reason, change)
    return jsonify(detail_view(job).model_dump(mode="json"))
