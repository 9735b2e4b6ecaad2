"""HTTP handlers of erasure: one submission, or everything of one student (docs/review.md).

The answer says what was removed and what remains where, and until when.
"""

from __future__ import annotations

from flask import Blueprint, Response, current_app, jsonify
from pydantic import BaseModel

from services.intake.auth.clients import ClientAuthenticator
from shared.domain.authorization import Principal
from shared.domain.erasure import ErasureReport
from shared.domain.errors import ValidationFailed
from shared.service_layer.erasure import ErasureService

bp = Blueprint("erasure", __name__, url_prefix="/v1")


class RemovedView(BaseModel):
    """What the erasure removed."""

    jobs: list[str]
    results: int
    reviews: int
    uploads: list[str]
    event_records: int
    assignment_tallies: list[str]


class RemainsView(BaseModel):
    """A copy the erasure could not remove: where, what, until when (and, for BigQuery,
    the statement that removes it)."""

    where: str
    what: str
    until: str
    statement: str | None = None


class ErasureView(BaseModel):
    """The answer of an erasure: its school and the author who asked, what it removed and
    what remains."""

    school: str
    author: str
    removed: RemovedView
    remains: list[RemainsView]


def _service() -> ErasureService:
    service: ErasureService = current_app.extensions["gradeq.erasure"]
    return service


def _principal() -> Principal:
    auth: ClientAuthenticator = current_app.extensions["gradeq.client_auth"]
    return auth.principal()


def erasure_view(report: ErasureReport) -> ErasureView:
    assert report.owner is not None  # every erasure is asked for by a school's principal
    return ErasureView(
        school=report.owner.school,
        author=report.owner.author,
        removed=RemovedView(
            jobs=report.jobs,
            results=report.results,
            reviews=report.reviews,
            uploads=report.uploads,
            event_records=report.event_records,
            assignment_tallies=report.assignment_tallies,
        ),
        remains=[RemainsView(**r) for r in report.remains],
    )


@bp.delete("/grading-jobs/<job_id>")
def erase_job(job_id: str) -> Response:
    report = _service().erase_job(_principal(), job_id)
    return jsonify(erasure_view(report).model_dump(mode="json", exclude_none=True))


@bp.delete("/students/<student_id>")
def erase_student(student_id: str) -> Response:
    principal = _principal()
    if not 0 < len(student_id) <= 256:
        raise ValidationFailed(
            "a student id has 1-256 characters",
            errors=[{"field": "student_id", "message": "1-256 characters"}],
        )
    report = _service().erase_student(principal, student_id)
    return jsonify(erasure_view(report).model_dump(mode="json", exclude_none=True))
