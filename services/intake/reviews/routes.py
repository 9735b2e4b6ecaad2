"""HTTP handlers of the review queue: list held grades, read one, accept or override it.

The school's reviewers, teachers and server key call these (shared/domain/authorization.py
decides who may), for every submission of their school, students' included; any other
school's job answers 404, as an unknown one.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import quote

from flask import Blueprint, Response, current_app, jsonify, request
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from services.intake.assignments.schemas import parse
from services.intake.auth.clients import ClientAuthenticator
from services.intake.jobs.views import RegradeRequestView, Result, _iso, regrade_request_view
from services.intake.limits.body import read_json_body
from services.intake.uploads.routes import uploads_service
from shared.domain.agreement import Agreement
from shared.domain.authorization import Action, Principal
from shared.domain.errors import GradeqError
from shared.domain.grade import GradeResult
from shared.domain.job import Job
from shared.domain.rubric import criteria_of
from shared.ports import ReviewQueue
from shared.service_layer.review import (
    AgreementReport,
    Override,
    ReviewService,
    agreement_report,
)

bp = Blueprint("reviews", __name__, url_prefix="/v1/reviews")

Cursor = Annotated[str, StringConstraints(min_length=1, max_length=512)]


class ReviewQueueQuery(BaseModel):
    """GET /v1/reviews query."""

    model_config = ConfigDict(extra="forbid")

    assignment_id: Annotated[str, StringConstraints(min_length=1, max_length=200)] | None = None
    limit: int = Field(default=50, ge=1, le=200)
    cursor: Cursor | None = None


class ReviewIn(BaseModel):
    """POST /v1/reviews/{job_id} body: accept the model's grade, or override it."""

    model_config = ConfigDict(extra="forbid", strict=True)

    decision: Literal["accept", "override"]
    reason: Annotated[str, StringConstraints(max_length=2000)] = ""
    score: float | None = Field(default=None, ge=0)
    criteria: list[dict[str, Any]] | None = Field(default=None, max_length=100)
    feedback: Annotated[str, StringConstraints(min_length=1, max_length=8000)] | None = None

    @model_validator(mode="after")
    def _override_has_score_and_reason(self) -> ReviewIn:
        if self.decision == "override" and (self.score is None or not self.reason.strip()):
            raise ValueError("an override needs a score and a reason")
        if self.decision == "accept" and (
            self.score is not None or self.criteria is not None or self.feedback is not None
        ):
            raise ValueError("an accept takes no score, criteria or feedback")
        return self


class HeldGradeView(BaseModel):
    """One grade in the review queue."""

    job_id: str
    submission_id: str
    assignment_id: str | None
    held_at: str
    reasons: list[str]
    release: str
    status: str
    model_score: float | None
    max_score: float
    confidence: float | None
    #: The student's regrade request that put the grade in the queue (null: none).
    regrade_request: RegradeRequestView | None = None
    #: The teacher's grade where a teacher decided before (a grade a regrade flagged).
    teacher_score: float | None = None


class ReviewQueueView(BaseModel):
    """One page of held grades, oldest first; `next_cursor` fetches the next."""

    reviews: list[HeldGradeView]
    next_cursor: str | None


class ReviewRecordView(BaseModel):
    """One reviewer's decision: who, when, accept or override, why, and the grade after it."""

    number: int
    by: str
    at: str
    decision: str
    reason: str
    result: Result
    #: The job's generation whose model grade the teacher saw (null: not recorded).
    generation: int | None = None


class ModelGradeView(BaseModel):
    """The model's grade of one generation of the job (each regrade makes one)."""

    generation: int
    rubric_version: int | None
    score: float
    feedback: str


class ReviewFileView(BaseModel):
    """One of the answer's files; its bytes at GET /v1/reviews/{job_id}/files/{index}, with
    the reviewer's credential (never a public URL)."""

    index: int
    name: str
    content_type: str
    size: int


class ReviewDetailView(HeldGradeView):
    """A held grade with what the reviewer needs: answer, rubric, model grade, reviews."""

    answer: str
    files: list[str]
    attachments: list[ReviewFileView]
    rubric: list[str]
    model_result: Result
    result: Result
    reviews: list[ReviewRecordView]
    #: The model's grade of each generation kept, oldest first.
    model_grades: list[ModelGradeView] = []


def _service() -> ReviewService:
    service: ReviewService = current_app.extensions["gradeq.reviews"]
    return service


def _reviewer() -> Principal:
    auth: ClientAuthenticator = current_app.extensions["gradeq.client_auth"]
    return auth.principal()


def _result(result: GradeResult) -> Result:
    return Result(**result.to_dict())


def held_view(job: Job) -> HeldGradeView:
    assert job.review is not None
    return HeldGradeView(
        job_id=job.id,
        submission_id=job.request.submission_id,
        assignment_id=job.request.assignment_id,
        held_at=_iso(job.review.held_at) or "",
        reasons=[r.value for r in job.review.reasons],
        release=job.review.release.value,
        status=job.review.status.value,
        model_score=job.result.score if job.result else None,
        max_score=job.request.max_score,
        confidence=job.result.confidence if job.result else None,
        regrade_request=regrade_request_view(job),
        teacher_score=job.teacher_result.score if job.teacher_result else None,
    )


def detail_view(job: Job) -> ReviewDetailView:
    assert job.review is not None and job.result is not None
    current = job.effective_result
    assert current is not None
    return ReviewDetailView(
        **held_view(job).model_dump(),
        answer=job.request.answer,
        files=[f.name or f.upload_id for f in job.request.files],
        attachments=[
            ReviewFileView(
                index=i, name=f.name or f.upload_id, content_type=f.content_type, size=f.size
            )
            for i, f in enumerate(job.request.files)
        ],
        rubric=list(criteria_of(job.request.rubric)),
        model_result=_result(job.result),
        result=_result(current),
        reviews=[
            ReviewRecordView(
                number=r.number,
                by=r.by,
                at=_iso(r.at) or "",
                decision=r.decision.value,
                reason=r.reason,
                result=_result(r.result),
                generation=r.generation,
            )
            for r in job.review.reviews
        ],
        model_grades=[
            ModelGradeView(
                generation=generation,
                rubric_version=rubric_version,
                score=grade.score,
                feedback=grade.feedback,
            )
            for generation, rubric_version, grade in job.model_grades()
        ],
    )


@bp.get("")
def list_held() -> Response:
    reviewer = _reviewer()
    query: ReviewQueueQuery = parse(
        ReviewQueueQuery, request.args.to_dict(), "invalid query parameters"
    )
    page = _service().held(reviewer, query.assignment_id, query.limit, query.cursor)
    body = ReviewQueueView(reviews=[held_view(j) for j in page.jobs], next_cursor=page.next_cursor)
    return jsonify(body.model_dump(mode="json"))


@bp.get("/<job_id>")
def get_review(job_id: str) -> Response:
    job = _service().get(_reviewer(), job_id)
    return jsonify(detail_view(job).model_dump(mode="json"))


class ReviewFileNotFound(GradeqError):
    slug = "review-file-not-found"
    title = "The held answer has no such file (or it was erased)"
    status = 404


#: A file's own answer may never run as a page of the intake's origin: no script, no
#: style, sandboxed, and downloaded rather than shown when opened directly.
FILE_POLICIES = {
    "Content-Security-Policy": "default-src 'none'; sandbox",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "private, no-store",
    "Referrer-Policy": "no-referrer",
}


@bp.get("/<job_id>/files/<index>")
def review_file(job_id: str, index: str) -> Response:
    """The bytes of one file of a held or reviewed answer, for the school's reviewers."""
    job = _service().get(_reviewer(), job_id)
    files = job.request.files
    # The file's place in the answer: 0, 1, ... (anything else names no file).
    at = int(index) if index.isascii() and index.isdigit() and len(index) <= 4 else -1
    data = uploads_service().read(files[at]) if 0 <= at < len(files) else None
    if data is None:
        raise ReviewFileNotFound(f"job {job_id} has no file {index!r}")
    ref = files[at]
    response = Response(data, mimetype=ref.content_type)
    response.headers.update(FILE_POLICIES)
    response.headers["Content-Disposition"] = f"attachment; filename*=UTF-8''{quote(ref.name)}"
    return response


@bp.post("/<job_id>")
def review(job_id: str) -> Response:
    reviewer = _reviewer()
    _service().get(reviewer, job_id, Action.REVIEW_DECIDE)  # 404/403 before the body
    body: ReviewIn = parse(ReviewIn, read_json_body(current_app.config["MAX_CONTENT_LENGTH"]))
    override = None
    if body.decision == "override":
        assert body.score is not None
        override = Override(
            body.score,
            tuple(body.criteria) if body.criteria is not None else None,
            body.feedback,
        )
    job = _service().decide(reviewer, job_id, body.reason, override)
    return jsonify(detail_view(job).model_dump(mode="json"))


class AgreementFigures(BaseModel):
    """Model against teacher: exact match rate, mean absolute difference, kappa."""

    reviewed: int
    exact_match_rate: float | None
    mean_absolute_difference: float | None
    quadratic_weighted_kappa: float | None


class ModelAgreementView(AgreementFigures):
    """The agreement on the grades of one model and prompt version."""

    model: str
    prompt_version: str


class AgreementView(AgreementFigures):
    """The agreement on an assignment's reviewed grades, in all and by model and prompt;
    `pairs` lists (model score, teacher score) for a plot."""

    assignment_id: str | None
    by_model: list[ModelAgreementView]
    pairs: list[tuple[float, float]]


def _figures(agreement: Agreement) -> dict[str, Any]:
    return {
        "reviewed": agreement.reviewed,
        "exact_match_rate": agreement.exact_match_rate,
        "mean_absolute_difference": agreement.mean_absolute_difference,
        "quadratic_weighted_kappa": agreement.kappa,
    }


def agreement_view(report: AgreementReport) -> AgreementView:
    return AgreementView(
        **_figures(report.overall),
        assignment_id=report.assignment_id,
        by_model=[
            ModelAgreementView(
                **_figures(m.agreement), model=m.model, prompt_version=m.prompt_version
            )
            for m in report.by_model
        ],
        pairs=report.pairs,
    )


#: GET /v1/reviews:agreement, apart from `bp` whose prefix would put a slash before the colon.
agreement_bp = Blueprint("review_agreement", __name__, url_prefix="/v1")


class AgreementQuery(BaseModel):
    """GET /v1/reviews:agreement query."""

    model_config = ConfigDict(extra="forbid")

    assignment_id: Annotated[str, StringConstraints(min_length=1, max_length=200)] | None = None


@agreement_bp.get("/reviews:agreement")
def agreement() -> Response:
    """Model against teacher on the reviewer's client's reviewed grades (for its plot)."""
    reviewer = _reviewer()
    query: AgreementQuery = parse(
        AgreementQuery, request.args.to_dict(), "invalid query parameters"
    )
    queue: ReviewQueue = current_app.extensions["gradeq.review_queue"]
    report = agreement_report(queue, reviewer, query.assignment_id)
    return jsonify(agreement_view(report).model_dump(mode="json"))
