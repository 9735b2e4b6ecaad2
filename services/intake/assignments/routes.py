"""HTTP handlers of assignments: create, read, revise, submit a class's answers, grades out."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from flask import (
    Blueprint,
    Response,
    current_app,
    jsonify,
    request,
    stream_with_context,
    url_for,
)

from services.intake.assignments.schemas import (
    AssignmentIn,
    AssignmentJobIn,
    PageQuery,
    PostIn,
    RegradeIn,
    ReportQuery,
    RubricRevisionIn,
    parse,
    parse_batch,
)
from services.intake.assignments.views import (
    AssignmentPageView,
    GradePageView,
    GradeRowView,
    PostReportView,
    assignment_view,
    batch_view,
    report_view,
    statistics_view,
)
from services.intake.auth.clients import ClientAuthenticator
from services.intake.jobs.views import job_model
from services.intake.limits.body import MAX_JSON_TOKENS, read_json_body
from services.intake.limits.rate_limit import batch_cost, rate_limit_headers, spend_submissions
from services.intake.uploads.routes import uploads_service
from shared.codecs.csv_cells import csv_line
from shared.domain.authorization import (
    SCHOOL_SETTINGS,
    Action,
    Principal,
    SetByTheSchool,
    require,
)
from shared.domain.errors import AssignmentNotFound, GradeqError, NoValidAnswer
from shared.domain.grade_sheet import COLUMNS as SHEET_COLUMNS
from shared.domain.grade_sheet import ClassStatistics, criteria_cells, grade_row
from shared.domain.rubric import criteria_of
from shared.http.callback_guard import CallbackGuard
from shared.http.errors import IdempotencyKeyInvalid, UnsupportedMediaType
from shared.service_layer.assignments import (
    MAX_BATCH,
    Answer,
    AssignmentService,
    ItemResult,
    ItemStatus,
)
from shared.service_layer.intake import Submission
from shared.service_layer.posting import PostingService
from shared.service_layer.regrade import Regrader
from shared.service_layer.uploads import UploadService

bp = Blueprint("assignments", __name__, url_prefix="/v1/assignments")

_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")
#: The largest batch body: 1,000 answers of 16 KiB on average (each at most 100 KiB).
MAX_BATCH_BODY_BYTES = 16 * 1024 * 1024
#: The most JSON tokens a batch body holds (100 an answer on average), counted before the
#: body is decoded: what decoding builds stays within a small multiple of the body's size.
MAX_BATCH_TOKENS = 100 * MAX_BATCH
CSV = "text/csv"
#: A batch's answers whose files are checked at once (each check reads its objects).
FILE_CHECKS_IN_FLIGHT = 16


def _service() -> AssignmentService:
    service: AssignmentService = current_app.extensions["gradeq.assignments"]
    return service


def _principal() -> Principal:
    auth: ClientAuthenticator = current_app.extensions["gradeq.client_auth"]
    return auth.principal()


def _json_body(limit: int | None = None, max_tokens: int = MAX_JSON_TOKENS) -> object:
    if request.mimetype != "application/json":
        raise UnsupportedMediaType(f"got Content-Type {request.mimetype or 'none'!r}")
    if limit is not None:
        request.max_content_length = limit
    return read_json_body(limit or current_app.config["MAX_CONTENT_LENGTH"], max_tokens=max_tokens)


def _json(model: Any, status: int = 200) -> Response:
    response = jsonify(model.model_dump(mode="json"))
    response.status_code = status
    return response


bp.after_request(rate_limit_headers)


@bp.post("")
def create_assignment() -> Response:
    principal = _principal()
    spend_submissions(principal.school)
    require(principal, Action.ASSIGNMENT_CREATE)
    key = request.headers.get("Idempotency-Key")
    if key is None or not _KEY.match(key):
        raise IdempotencyKeyInvalid("send an Idempotency-Key of 1-255 visible ASCII characters")
    body: AssignmentIn = parse(AssignmentIn, _json_body())
    assignment, created = _service().create(
        principal,
        key,
        body.title,
        body.rubric_value(),
        body.max_score,
        body.prompt_version,
        body.settings(),
    )
    response = _json(assignment_view(assignment), 201 if created else 200)
    response.headers["Location"] = url_for(
        "assignments.get_assignment", assignment_id=assignment.id
    )
    if not created:
        response.headers["Idempotent-Replayed"] = "true"
    return response


@bp.get("")
def list_assignments() -> Response:
    query: PageQuery = parse(PageQuery, request.args.to_dict(), "invalid query parameters")
    page = _service().page(_principal(), query.limit, query.cursor)
    return _json(
        AssignmentPageView(
            assignments=[assignment_view(a) for a in page.assignments],
            next_cursor=page.next_cursor,
        )
    )


@bp.get("/<assignment_id>")
def get_assignment(assignment_id: str) -> Response:
    progress = _service().progress(_principal(), assignment_id)
    response = _json(assignment_view(progress.assignment, progress.tally))
    if not progress.tally.done:
        response.headers["Retry-After"] = str(current_app.config["RETRY_AFTER_S"])
    return response


@bp.patch("/<assignment_id>")
def revise_assignment(assignment_id: str) -> Response:
    principal = _principal()
    _service().get(principal, assignment_id, Action.ASSIGNMENT_EDIT)  # 404/403 before the body
    body: RubricRevisionIn = parse(RubricRevisionIn, _json_body())
    service = _service()
    revised = None
    if body.regrade_requests_until is not None:
        revised = service.set_requests_until(principal, assignment_id, body.regrade_requests_until)
    rubric = body.rubric_value()
    if rubric is not None:
        revised = service.revise(principal, assignment_id, rubric)
    assert revised is not None
    return _json(assignment_view(revised))


@bp.post("/<assignment_id>/submissions:batch")
def submit_batch(assignment_id: str) -> Response:
    principal = _principal()
    spend_submissions(principal.school)  # before the body is read: a refused body costs too
    # A 404 (or 403) before any callback URL is resolved.
    _service().get(principal, assignment_id, Action.ASSIGNMENT_BATCH)
    parsed = parse_batch(_json_body(MAX_BATCH_BODY_BYTES, MAX_BATCH_TOKENS))
    spend_submissions(principal.school, batch_cost(len(parsed)) - 1)
    guard: CallbackGuard = current_app.extensions["gradeq.callback_guard"]
    guard.check_hosts(
        item.callback_url
        for item in parsed
        if not isinstance(item, tuple) and item.callback_url is not None
    )
    valid: dict[int, Answer] = {}
    refused: dict[int, tuple[str | None, GradeqError]] = {}
    for index, item in enumerate(parsed):
        if isinstance(item, tuple):
            refused[index] = item
            continue
        try:
            if item.callback_url is not None:
                guard.check(item.callback_url)
        except GradeqError as error:
            refused[index] = (item.submission_id, error)
            continue
        valid[index] = item
    for index, checked in _check_files(principal, valid).items():
        if isinstance(checked, GradeqError):
            refused[index] = (valid.pop(index).submission_id, checked)
        else:
            valid[index] = checked
    answers = [valid[i] for i in sorted(valid)]
    if not answers:
        raise NoValidAnswer(
            "no answer of the batch is valid: see each item's problem",
            items=batch_view(list(refused.values())).model_dump(mode="json")["items"],
        )
    stored = iter(_service().submit_batch(principal, assignment_id, answers))
    results: list[ItemResult | tuple[str | None, GradeqError]] = [
        refused[i] if i in refused else next(stored) for i in range(len(parsed))
    ]
    return _json(batch_view(results))


@bp.post("/<assignment_id>/regrade")
def regrade(assignment_id: str) -> Response:
    principal = _principal()
    _service().get(principal, assignment_id, Action.ASSIGNMENT_REGRADE)  # before the body
    body: RegradeIn = parse(RegradeIn, _json_body())
    regrader: Regrader = current_app.extensions["gradeq.regrader"]
    assignment = regrader.regrade(
        principal, assignment_id, body.rubric_value(), body.prompt_version, body.reopen_reviewed
    )
    response = _json(assignment_view(assignment), 202)
    response.headers["Location"] = url_for(
        "assignments.regrade_report", assignment_id=assignment.id
    )
    return response


@bp.get("/<assignment_id>/regrade")
def regrade_report(assignment_id: str) -> Response:
    principal = _principal()
    query: ReportQuery = parse(ReportQuery, request.args.to_dict(), "invalid query parameters")
    regrader: Regrader = current_app.extensions["gradeq.regrader"]
    return _json(report_view(regrader.report(principal, assignment_id, query.threshold)))


@bp.post("/<assignment_id>/grades:post")
def post_grades(assignment_id: str) -> Response:
    """Post the assignment's final grades (or the chosen submissions') to students and
    downstream systems: each changed grade is a new version with its own event."""
    principal = _principal()
    _service().get(principal, assignment_id, Action.ASSIGNMENT_POST)  # before the body
    body: PostIn = parse(PostIn, _json_body())
    posting: PostingService = current_app.extensions["gradeq.posting"]
    report = posting.post(principal, assignment_id, body.submission_ids)
    return _json(
        PostReportView(posted=report.posted, unchanged=report.unchanged, not_ready=report.not_ready)
    )


@bp.get("/<assignment_id>/grades")
def grades(assignment_id: str) -> Response:
    principal = _principal()
    if request.accept_mimetypes.best_match(["application/json", CSV]) == CSV:
        return _grades_csv(principal, assignment_id)
    query: PageQuery = parse(PageQuery, request.args.to_dict(), "invalid query parameters")
    service = _service()
    page = service.grades(principal, assignment_id, query.limit, query.cursor)
    stats = None
    if query.cursor is None:  # the class statistics come with the first page
        assignment = service.get(principal, assignment_id, Action.ASSIGNMENT_GRADES)
        stats = statistics_view(ClassStatistics.of(service.all_grades(assignment)))
    return _json(
        GradePageView(
            jobs=[job_model(j) for j in page.jobs],
            grades=[GradeRowView(**grade_row(j)) for j in page.jobs],
            statistics=stats,
            next_cursor=page.next_cursor,
        )
    )


def _grades_csv(principal: Principal, assignment_id: str) -> Response:
    service = _service()
    # A 404 (or 403) before the stream starts.
    assignment = service.get(principal, assignment_id, Action.ASSIGNMENT_GRADES)
    criteria = criteria_of(assignment.rubric.rubric)

    def rows() -> Iterator[str]:
        yield csv_line([*SHEET_COLUMNS, *criteria])
        for job in service.all_grades(assignment):
            row = grade_row(job)
            yield csv_line([*(row[c] for c in SHEET_COLUMNS), *criteria_cells(job, len(criteria))])

    response = Response(stream_with_context(rows()), mimetype=CSV)
    response.headers["Content-Disposition"] = f'attachment; filename="{assignment.id}.csv"'
    return response


def _check_files(
    principal: Principal, answers: dict[int, Answer]
) -> dict[int, Answer | GradeqError]:
    """Each answer with files, checked (or why it is refused), by index. The checks read
    the stored objects (Cloud Storage on Google Cloud): they run side by side."""
    with_files = {i: a for i, a in answers.items() if a.files}
    uploads = uploads_service()

    def one(answer: Answer) -> Answer | GradeqError:
        try:
            return _with_checked_files(principal, answer, uploads)
        except GradeqError as error:
            return error

    if len(with_files) <= 1:
        return {i: one(a) for i, a in with_files.items()}
    with ThreadPoolExecutor(max_workers=min(FILE_CHECKS_IN_FLIGHT, len(with_files))) as pool:
        return dict(zip(with_files, pool.map(one, with_files.values()), strict=True))


def _with_checked_files(
    principal: Principal, answer: Answer, uploads: UploadService | None = None
) -> Answer:
    """The answer with its files checked as a job's are (docs/uploads.md): present, the
    school's, as declared, within the limits, and the caller's to attach."""
    if not answer.files:
        return answer
    uploads = uploads or uploads_service()
    checked = uploads.verify(principal.school, answer.files, answer.student_id, principal)
    return dataclasses.replace(answer, files=checked)


def submit_to_assignment(principal: Principal, payload: object) -> Submission | None:
    """Submit a single job's body that names one of the school's assignments.

    None when it names none (for the school's staff an `assignment_id` may also be a
    free-form label on a job that carries its own rubric): the caller handles it as a job
    of its own. A student's answer takes everything but the answer from the assignment and
    the school: a body that sets any of it is refused, and the student id is the
    student's own.
    """
    assignment_id = payload.get("assignment_id") if isinstance(payload, dict) else None
    service: AssignmentService | None = current_app.extensions.get("gradeq.assignments")
    if service is None or not isinstance(assignment_id, str) or not isinstance(payload, dict):
        return None
    configures = principal.may(Action.JOB_CONFIGURE)
    if service.find(principal, assignment_id) is None:
        if configures:
            return None
        raise AssignmentNotFound(f"no assignment {assignment_id}")
    if not configures:
        refused = sorted(f for f in SCHOOL_SETTINGS if f in payload)
        if payload.get("student_id", principal.author) != principal.author:
            refused.append("student_id")
        if refused:
            raise SetByTheSchool(
                f"the assignment and the school set {', '.join(refused)}", fields=refused
            )
        payload = {**payload, "student_id": principal.author}
    body: AssignmentJobIn = parse(AssignmentJobIn, payload)
    if body.callback_url is not None:
        guard: CallbackGuard = current_app.extensions["gradeq.callback_guard"]
        guard.check(body.callback_url)
    answer = _with_checked_files(principal, body.to_answer())
    [result] = service.submit_batch(principal, assignment_id, [answer], Action.JOB_SUBMIT)
    if result.problem is not None:
        raise result.problem
    assert result.job is not None
    return Submission(result.job, result.status is ItemStatus.ACCEPTED)
