"""A reviewer reads a held answer's files through the review API, with their own
credential: the bytes as checked at submit, under headers that never let them run as a
page of the intake; nobody else reads them."""

from __future__ import annotations

from flask.testing import FlaskClient

from services.intake.page_kit import CONTENT_SECURITY_POLICY
from services.worker.app import create_app as create_worker
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.errors import PROBLEM_BASE
from tests.fakes import FakeTaskQueue
from tests.support import files
from tests.unit.test_assignment_files import _model_grader, _uploaded
from tests.unit.test_assignment_flow import deliver_all
from tests.unit.test_school_policy import OTHER_STUDENT, SERVER, STUDENT, TEACHER, intake_of

PNG = files.png()


def _held_photo(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> tuple[FlaskClient, str]:
    """A student's photographed answer to an assignment whose every grade is held."""
    intake = intake_of(settings, adapters, clock)
    body = {
        "title": "Respiration",
        "rubric": ["names the mitochondria", "names ATP", "explains glycolysis"],
        "review": {"sample_rate": 1},
    }
    created = intake.post("/v1/assignments", json=body, headers={**SERVER, "Idempotency-Key": "a"})
    photo = {**_uploaded(intake, who=STUDENT), "name": "page 1.png"}
    sent = intake.post(
        "/v1/grading-jobs",
        json={
            "submission_id": "mine",
            "answer": "see the photo",
            "assignment_id": created.get_json()["id"],
            "files": [photo],
        },
        headers={**STUDENT, "Idempotency-Key": "k"},
    )
    assert sent.status_code == 202, sent.get_json()
    grader, _ = _model_grader(settings)
    queue = adapters.queue
    assert isinstance(queue, FakeTaskQueue)
    deliver_all(create_worker(settings, adapters, grader, clock).test_client(), queue)
    return intake, str(sent.get_json()["id"])


def test_a_reviewer_reads_the_photo_of_a_held_answer_and_grades_it(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    intake, job_id = _held_photo(settings, adapters, clock)
    detail = intake.get(f"/v1/reviews/{job_id}", headers=TEACHER).get_json()
    assert detail["attachments"] == [
        {"index": 0, "name": "page 1.png", "content_type": "image/png", "size": len(PNG)}
    ]
    got = intake.get(f"/v1/reviews/{job_id}/files/0", headers=TEACHER)
    assert got.status_code == 200 and got.data == PNG
    assert got.mimetype == "image/png"
    assert got.headers["Content-Security-Policy"] == "default-src 'none'; sandbox"
    assert got.headers["X-Content-Type-Options"] == "nosniff"
    assert got.headers["Cache-Control"] == "private, no-store"
    assert got.headers["Content-Disposition"] == "attachment; filename*=UTF-8''page%201.png"
    # Reviewed like a text answer, it counts in the agreement of model and teachers.
    body = {"decision": "override", "score": 8, "reason": "the photo shows glycolysis"}
    assert intake.post(f"/v1/reviews/{job_id}", json=body, headers=TEACHER).status_code == 200
    agreement = intake.get("/v1/reviews:agreement", headers=TEACHER).get_json()
    assert agreement["reviewed"] == 1 and agreement["pairs"] == [[6.0, 8.0]]


def test_nobody_else_reads_it_and_a_missing_file_is_a_404(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    intake, job_id = _held_photo(settings, adapters, clock)
    url = f"/v1/reviews/{job_id}/files/0"
    assert intake.get(url).status_code == 401
    # The review API is the school's: the student who sent it may not (403), another
    # student does not learn it exists (404).
    own = intake.get(url, headers=STUDENT)
    assert own.status_code == 403 and own.get_json()["type"] == PROBLEM_BASE + "forbidden"
    other = intake.get(url, headers=OTHER_STUDENT)
    assert other.status_code == 404 and other.get_json()["type"] == PROBLEM_BASE + "job-not-found"
    for index in ("1", "-1", "x", "00000001", "\u0661"):  # beyond, or no index at all
        beyond = intake.get(f"/v1/reviews/{job_id}/files/{index}", headers=TEACHER)
        assert beyond.status_code == 404, index
        assert beyond.get_json()["type"] == PROBLEM_BASE + "review-file-not-found"


def test_the_review_page_may_show_an_image_the_script_fetched() -> None:
    directives = dict(d.split(" ", 1) for d in CONTENT_SECURITY_POLICY.split("; "))
    assert directives["img-src"].split() == ["'self'", "blob:"]
    assert directives["connect-src"] == "'self'" and directives["script-src"] == "'self'"
