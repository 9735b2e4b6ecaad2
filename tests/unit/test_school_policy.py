"""A student works inside the school, never beside it.

One test per way a signed-in student's scope used to stand apart from its school: the
student's self-written grade signed as the school's, the school blind to its students'
submissions, review rules skipping them, the lane allow-list bypassed (by a student, by a
batch), and the school unable to erase a student's work.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from flask.testing import FlaskClient
from google.auth import jwt as google_jwt

from services.intake.app import create_app as create_intake
from services.intake.auth.firebase import CachingRequest, FirebaseAuthenticator
from services.worker.app import create_app as create_worker
from shared.adapters.graders.rubric import RubricGrader
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.events import GradingCompleted
from tests.fakes import FakePublisher, FakeTaskQueue
from tests.unit.conftest import API_KEY
from tests.unit.test_assignment_flow import deliver_all
from tests.unit.test_intake_firebase_auth import (
    PROJECT,
    SESSION_LIFETIME_S,
    FakeCertEndpoint,
    token,
)

SERVER = {"Authorization": f"Bearer {API_KEY}"}


def signed_in(**claims: str) -> dict[str, str]:
    """The headers of a Firebase sign-in minted at import, valid for the whole run."""
    return {"Authorization": f"Bearer {token(SESSION_LIFETIME_S, **claims)}"}


STUDENT = signed_in(gradeq_client="client-a", sub="ada")
OTHER_STUDENT = signed_in(gradeq_client="client-a", sub="bo")
TEACHER = signed_in(gradeq_client="client-a", sub="ms-t", gradeq_role="teacher")


def intake_of(settings: Settings, adapters: Adapters, clock: FrozenClock) -> FlaskClient:
    firebase = FirebaseAuthenticator(
        PROJECT, "gradeq_client", {}, CachingRequest(FakeCertEndpoint())
    )
    return create_intake(settings, adapters, clock, firebase=firebase).test_client()


@pytest.fixture
def intake(settings: Settings, adapters: Adapters, clock: FrozenClock) -> FlaskClient:
    """The intake of a school that allows its students practice jobs."""
    return intake_of(settings.model_copy(update={"practice_clients": "client-a"}), adapters, clock)


#: A student's job of their own: a practice job, where the school allows them.
PRACTICE = {"submission_id": "p", "answer": "light", "rubric": "light", "max_score": 10}


def student_job(intake: FlaskClient, kind: str) -> str:
    """A student's submission: into the school's assignment, or a practice job."""
    if kind == "assignment":
        response = student_submits(intake, assignment(intake))
    else:
        response = intake.post(
            "/v1/grading-jobs", json=PRACTICE, headers={**STUDENT, "Idempotency-Key": "p"}
        )
    assert response.status_code == 202, response.get_json()
    return str(response.get_json()["id"])


KINDS = ["assignment", "practice"]


def assignment(intake: FlaskClient, review: dict[str, Any] | None = None) -> str:
    body: dict[str, Any] = {"title": "Leaves", "rubric": "light; chlorophyll", "max_score": 10}
    if review is not None:
        body["review"] = review
    created = intake.post("/v1/assignments", json=body, headers={**SERVER, "Idempotency-Key": "a"})
    assert created.status_code == 201, created.get_json()
    return str(created.get_json()["id"])


def student_submits(
    intake: FlaskClient, assignment_id: str, who: dict[str, str] = STUDENT, **extra: Any
) -> Any:
    body = {
        "submission_id": "mine",
        "answer": "light and chlorophyll",
        "assignment_id": assignment_id,
    }
    return intake.post(
        "/v1/grading-jobs", json={**body, **extra}, headers={**who, "Idempotency-Key": "k"}
    )


def test_a_student_cannot_grade_themselves_on_the_schools_assignment(
    intake: FlaskClient, adapters: Adapters
) -> None:
    assignment_id = assignment(intake)
    # The teacher's real assignment id, the student's own rubric and score: refused.
    forged = student_submits(intake, assignment_id, rubric="anything at all", max_score=100)
    assert forged.status_code == 403, forged.get_json()
    problem = forged.get_json()
    assert problem["type"].endswith("/set-by-the-school")
    assert problem["fields"] == ["max_score", "rubric"]
    hooked = student_submits(intake, assignment_id, callback_url="https://client.example/hook")
    assert hooked.status_code == 403 and hooked.get_json()["fields"] == ["callback_url"]
    # Without them, the answer is graded on the assignment's rubric, as the student's.
    sent = student_submits(intake, assignment_id)
    assert sent.status_code == 202, sent.get_json()
    job = adapters.store.get(sent.get_json()["id"])
    assert job is not None
    assert (job.client_id, job.author) == ("client-a", "ada")
    assert job.request.rubric == "light; chlorophyll" and job.request.max_score == 10
    assert job.request.callback_url is None and job.request.student_id == "ada"


def test_a_student_outside_the_assignments_is_refused_unless_the_school_allows_practice(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    own = {"submission_id": "p", "answer": "light", "rubric": "light", "max_score": 100}
    intake = intake_of(settings, adapters, clock)
    refused = intake.post("/v1/grading-jobs", json=own, headers={**STUDENT, "Idempotency-Key": "p"})
    assert refused.status_code == 403
    assert refused.get_json()["type"].endswith("/assignment-required")
    practising = intake_of(
        settings.model_copy(update={"practice_clients": "client-a"}), adapters, clock
    )
    hooked = {**own, "callback_url": "https://client.example/hook"}
    no_hook = practising.post(
        "/v1/grading-jobs", json=hooked, headers={**STUDENT, "Idempotency-Key": "p"}
    )
    assert no_hook.status_code == 403
    assert no_hook.get_json()["type"].endswith("/set-by-the-school")
    accepted = practising.post(
        "/v1/grading-jobs", json=own, headers={**STUDENT, "Idempotency-Key": "p"}
    )
    assert accepted.status_code == 202
    job = adapters.store.get(accepted.get_json()["id"])
    assert job is not None and job.request.practice and job.author == "ada"


def test_a_practice_jobs_event_says_so_and_names_its_author(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    practising = intake_of(
        settings.model_copy(update={"practice_clients": "client-a"}), adapters, clock
    )
    own = {"submission_id": "p", "answer": "light", "rubric": "light", "max_score": 100}
    job_id = practising.post(
        "/v1/grading-jobs", json=own, headers={**STUDENT, "Idempotency-Key": "p"}
    ).get_json()["id"]
    worker = create_worker(settings, adapters, RubricGrader(simulate=False), clock).test_client()
    assert isinstance(adapters.queue, FakeTaskQueue)
    deliver_all(worker, adapters.queue)
    assert isinstance(adapters.publisher, FakePublisher)
    [event] = [e for e in adapters.publisher.events if isinstance(e, GradingCompleted)]
    assert event.job_id == job_id
    assert event.data()["practice"] is True and event.data()["author"] == "ada"
    assert event.data()["client_id"] == "client-a"


@pytest.mark.parametrize("kind", KINDS)
def test_the_school_sees_every_students_submission(intake: FlaskClient, kind: str) -> None:
    job_id = student_job(intake, kind)
    for staff in (SERVER, TEACHER):
        seen = intake.get(f"/v1/grading-jobs/{job_id}", headers=staff)
        assert seen.status_code == 200
        assert seen.get_json()["author"] == "ada"
        assert seen.get_json()["practice"] is (kind == "practice")
        listed = intake.get("/v1/grading-jobs", headers=staff).get_json()["jobs"]
        assert job_id in [j["id"] for j in listed]
    # Another student of the school does not see it.
    assert intake.get(f"/v1/grading-jobs/{job_id}", headers=OTHER_STUDENT).status_code == 404


def test_the_grade_sheet_holds_the_students_submissions(intake: FlaskClient) -> None:
    assignment_id = assignment(intake)
    job_id = student_submits(intake, assignment_id).get_json()["id"]
    for staff in (SERVER, TEACHER):
        grades = intake.get(f"/v1/assignments/{assignment_id}/grades", headers=staff).get_json()
        assert [j["id"] for j in grades["jobs"]] == [job_id]


@pytest.mark.parametrize("kind", KINDS)
def test_the_schools_review_rules_hold_a_students_submission(
    settings: Settings, adapters: Adapters, clock: FrozenClock, kind: str
) -> None:
    hold_all = {"sample_rate": 1, "release": "after_review"}
    school = settings.model_copy(
        update={"practice_clients": "client-a", "client_review_policies": {"client-a": hold_all}}
    )
    intake = intake_of(school, adapters, clock)
    if kind == "assignment":  # the assignment's rules
        job_id = student_submits(intake, assignment(intake, hold_all)).get_json()["id"]
    else:  # the school's rules for jobs without an assignment
        job_id = student_job(intake, kind)
    worker = create_worker(school, adapters, RubricGrader(simulate=False), clock).test_client()
    assert isinstance(adapters.queue, FakeTaskQueue)
    deliver_all(worker, adapters.queue)
    seen = intake.get(f"/v1/grading-jobs/{job_id}", headers=STUDENT).get_json()
    assert seen["status"] == "SUCCEEDED" and seen.get("result") is None  # not yet released
    queue = intake.get("/v1/reviews", headers=TEACHER).get_json()["reviews"]
    assert [r["job_id"] for r in queue] == [job_id]
    assert isinstance(adapters.publisher, FakePublisher)
    assert not [e for e in adapters.publisher.events if isinstance(e, GradingCompleted)]
    reviewed = intake.post(
        f"/v1/reviews/{job_id}", json={"decision": "accept", "reason": "fair"}, headers=TEACHER
    )
    assert reviewed.status_code == 200
    released = intake.get(f"/v1/grading-jobs/{job_id}", headers=STUDENT).get_json()
    assert released["result"]["score"] is not None


def test_a_student_cannot_pick_a_lane_the_school_may_not_use(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    bulk_only = settings.model_copy(
        update={"client_lanes": "client-a=bulk", "practice_clients": "client-a"}
    )
    intake = intake_of(bulk_only, adapters, clock)
    assignment_id = assignment(intake)
    exam = student_submits(intake, assignment_id, lane="exam")
    assert exam.status_code == 403 and exam.get_json()["type"].endswith("/set-by-the-school")
    practice = {"submission_id": "p", "answer": "x", "rubric": "light", "lane": "exam"}
    refused = intake.post(
        "/v1/grading-jobs", json=practice, headers={**STUDENT, "Idempotency-Key": "p"}
    )
    assert refused.status_code == 403
    # A signed-in teacher is held to the school's lanes too.
    teacher_exam = intake.post(
        "/v1/grading-jobs", json=practice, headers={**TEACHER, "Idempotency-Key": "t"}
    )
    assert teacher_exam.status_code == 403
    assert teacher_exam.get_json()["type"].endswith("/lane-not-allowed")
    # What the student may send goes to the school's lane.
    job_id = student_submits(intake, assignment_id).get_json()["id"]
    job = adapters.store.get(job_id)
    assert job is not None and job.lane == "bulk"


def test_batch_jobs_go_to_the_schools_lane_not_the_default_queue(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    intake = intake_of(
        settings.model_copy(update={"client_lanes": "client-a=bulk"}), adapters, clock
    )
    assignment_id = assignment(intake)
    body = {"answers": [{"submission_id": "s1", "answer": "light"}]}
    batch = intake.post(
        f"/v1/assignments/{assignment_id}/submissions:batch", json=body, headers=SERVER
    )
    [item] = batch.get_json()["items"]
    job = adapters.store.get(item["job_id"])
    assert job is not None and job.lane == "bulk"
    assert isinstance(adapters.queue, FakeTaskQueue)
    assert [t.queue for t in adapters.queue.tasks] == ["bulk"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("staff", [SERVER, TEACHER], ids=["server", "teacher"])
def test_the_school_erases_a_students_own_submission(
    intake: FlaskClient, adapters: Adapters, staff: dict[str, str], kind: str
) -> None:
    job_id = student_job(intake, kind)
    erased = intake.delete(f"/v1/grading-jobs/{job_id}", headers=staff)
    assert erased.status_code == 200, erased.get_json()
    assert erased.get_json()["removed"]["jobs"] == [job_id]
    assert adapters.store.get(job_id) is None


def test_the_school_erases_every_submission_of_a_signed_in_student(
    intake: FlaskClient, adapters: Adapters
) -> None:
    assignment_id = assignment(intake)
    job_id = student_submits(intake, assignment_id).get_json()["id"]
    erased = intake.delete("/v1/students/ada", headers=SERVER)
    assert erased.get_json()["removed"]["jobs"] == [job_id]
    assert adapters.store.get(job_id) is None
    # A student erases nothing of the school's, their own submissions included.
    again = student_submits(intake, assignment_id).get_json()["id"]
    refused = intake.delete(f"/v1/grading-jobs/{again}", headers=STUDENT)
    assert refused.status_code == 403
    assert intake.delete("/v1/students/ada", headers=STUDENT).status_code == 403


def test_a_students_upload_is_their_own_and_their_practice_job_names_it(
    intake: FlaskClient, adapters: Adapters
) -> None:
    other = intake.post(
        "/v1/uploads",
        json={"content_type": "text/plain", "size": 5, "student_id": "bo"},
        headers=STUDENT,
    )
    assert other.status_code == 403 and other.get_json()["fields"] == ["student_id"]
    created = intake.post(
        "/v1/uploads", json={"content_type": "text/plain", "size": 5}, headers=STUDENT
    ).get_json()
    put = intake.put(created["upload_url"], data=b"light", headers=created["headers"])
    assert put.status_code < 300
    files = [{"upload_id": created["upload_id"], "content_type": "text/plain", "size": 5}]
    sent = intake.post(
        "/v1/grading-jobs",
        json={**PRACTICE, "answer": "", "files": files},
        headers={**STUDENT, "Idempotency-Key": "f"},
    )
    assert sent.status_code == 202, sent.get_json()
    erased = intake.delete("/v1/students/ada", headers=SERVER).get_json()
    assert erased["removed"]["jobs"] == [sent.get_json()["id"]]
    assert len(erased["removed"]["uploads"]) == 1


def test_an_upload_names_its_school_and_its_author(intake: FlaskClient) -> None:
    blobs = intake.application.extensions["gradeq.blob_receiver"]
    owners = []
    for who in (STUDENT, SERVER):
        created = intake.post(
            "/v1/uploads", json={"content_type": "text/plain", "size": 5}, headers=who
        ).get_json()
        put = intake.put(created["upload_url"], data=b"light", headers=created["headers"])
        assert put.status_code < 300
        name = created["upload_url"].split("?")[0].split("/v1/blobs/", 1)[1]
        info = blobs.stat(name)
        owners.append((info.owner.school, info.owner.author))
    assert owners == [("client-a", "ada"), ("client-a", "server")]


def test_an_erasure_record_names_its_school_and_the_author_who_erased(
    intake: FlaskClient,
) -> None:
    job_id = student_job(intake, "practice")
    erased = intake.delete(f"/v1/grading-jobs/{job_id}", headers=TEACHER).get_json()
    assert (erased["school"], erased["author"]) == ("client-a", "ms-t")
    by_server = intake.delete("/v1/students/ada", headers=SERVER).get_json()
    assert (by_server["school"], by_server["author"]) == ("client-a", "server")


def test_the_sign_ins_minted_at_import_outlive_a_long_run() -> None:
    # Their modules may be imported hours before their tests run (mutmut imports once).
    decode: Callable[..., dict[str, Any]] = google_jwt.decode  # google-auth's, unannotated
    for headers in (STUDENT, OTHER_STUDENT, TEACHER):
        claims = decode(headers["Authorization"].removeprefix("Bearer "), verify=False)
        assert claims["exp"] - time.time() > 24 * 3600
