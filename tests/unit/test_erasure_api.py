"""Erasure of a submission and of a student: jobs, results, reviews, uploads, dedup records
and the assignment tally go; the answer says what remains where and until when."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from flask.testing import FlaskClient

from services.intake.app import create_app as create_intake
from services.worker.app import create_app as create_worker
from shared.adapters.embedded.processed_events import SqliteProcessedEvents
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.adapters.graders.rubric import RubricGrader
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.events import GradingCompleted
from shared.domain.status import JobStatus
from shared.service_layer.erasure import bigquery_statement
from tests.fakes import FakeTaskQueue
from tests.unit.conftest import API_KEY, OTHER_KEY
from tests.unit.test_assignment_flow import deliver_all
from tests.unit.test_intake_uploads import _put, _stored, _uploaded

AUTH = {"Authorization": f"Bearer {API_KEY}"}
TABLE = "proj.analytics.grading_completed_raw"


@pytest.fixture
def erasing(settings: Settings) -> Settings:
    return Settings(
        **{
            **settings.model_dump(),
            "analytics_table": TABLE,
            "log_retention_days": 30,
            "reviewer_keys": "client-a/ms=reviewer-secret",
        }
    )


def submit(intake: FlaskClient, body: dict[str, Any], key: str) -> str:
    response = intake.post("/v1/grading-jobs", json=body, headers={**AUTH, "Idempotency-Key": key})
    assert response.status_code == 202, response.get_json()
    return str(response.get_json()["id"])


def test_a_students_work_is_erased_with_its_uploads_records_and_tally(
    erasing: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    intake = create_intake(erasing, adapters, clock).test_client()
    worker = create_worker(erasing, adapters, RubricGrader(simulate=False), clock).test_client()
    queue = adapters.queue
    assert isinstance(queue, FakeTaskQueue) and adapters.assignments is not None
    created = intake.post(
        "/v1/assignments",
        json={"title": "Essay", "rubric": "light; chlorophyll", "review": {"sample_rate": 1}},
        headers={**AUTH, "Idempotency-Key": "a"},
    ).get_json()
    batch = {
        "answers": [
            {"submission_id": "s1", "answer": "light", "student_id": "ada"},
            {"submission_id": "s2", "answer": "light chlorophyll", "student_id": "bob"},
        ]
    }
    intake.post(f"/v1/assignments/{created['id']}/submissions:batch", json=batch, headers=AUTH)
    ref = _uploaded(intake, "text/plain", b"light and chlorophyll")
    with_file = submit(
        intake,
        {"submission_id": "s3", "rubric": "light", "files": [ref], "student_id": "ada"},
        "k3",
    )
    plain = {"submission_id": "s4", "answer": "x", "rubric": "light", "student_id": "ada"}
    fourth = submit(intake, plain, "k4")
    deliver_all(worker, queue)
    jobs = {j.request.submission_id: j for j in _all(adapters)}
    assert jobs["s1"].status is JobStatus.SUCCEEDED and jobs["s1"].review is not None
    reviewed = intake.post(
        f"/v1/reviews/{jobs['s1'].id}",
        json={"decision": "accept", "reason": "fine"},
        headers={"Authorization": "Bearer reviewer-secret"},
    )
    assert reviewed.status_code == 200, reviewed.get_json()
    # What the notifier keeps to deduplicate the job's event.
    processed = SqliteProcessedEvents(SqliteDatabase(erasing.database_path))
    completed = GradingCompleted.from_job(jobs["s1"]).event_id
    processed.add("notifier", completed, {"job_id": jobs["s1"].id})
    before = adapters.assignments.tally(created["id"], 0)
    assert before.total == 2 and before.scored == 2

    # Another client cannot erase them.
    other = intake.delete("/v1/students/ada", headers={"Authorization": f"Bearer {OTHER_KEY}"})
    assert other.status_code == 200 and other.get_json()["removed"]["jobs"] == []
    foreign = intake.delete(
        f"/v1/grading-jobs/{with_file}", headers={"Authorization": f"Bearer {OTHER_KEY}"}
    )
    assert foreign.status_code == 404

    answer = intake.delete("/v1/students/ada", headers=AUTH)
    assert answer.status_code == 200, answer.get_json()
    removed = answer.get_json()["removed"]
    assert sorted(removed["jobs"]) == sorted([jobs["s1"].id, with_file, fourth])
    # s3's file is one the offline grader here cannot read: that job failed, with no result.
    assert removed["results"] == 2 and removed["reviews"] == 1 and removed["event_records"] == 1
    assert len(removed["uploads"]) == 1
    assert removed["assignment_tallies"] == [f"{created['id']} round 0"]
    assert not _stored(erasing, ref["upload_id"]).exists()
    assert processed.records("notifier") == []  # a tombstone is left, holding no record
    for job_id in removed["jobs"]:
        assert adapters.store.get(job_id) is None
        assert intake.get(f"/v1/grading-jobs/{job_id}", headers=AUTH).status_code == 404
    after = adapters.assignments.tally(created["id"], 0)
    bob = jobs["s2"]
    assert bob.result is not None
    assert (after.total, after.scored, after.score_sum) == (1, 1, bob.result.score)
    assert adapters.store.get(bob.id) is not None  # another student's work stays

    remains = {r["where"]: r for r in answer.get_json()["remains"]}
    assert "never the answer" in remains["logs"]["what"]
    assert remains["logs"]["until"] == (clock.now() + timedelta(days=30)).isoformat()
    statement = remains["bigquery"]["statement"]
    expected = bigquery_statement(TABLE, removed["jobs"])
    assert (
        statement == expected and TABLE in statement and "JSON_VALUE(data, '$.job_id')" in statement
    )
    assert all(f"'{j}'" in statement for j in removed["jobs"])
    assert (clock.now() + timedelta(minutes=90)).isoformat() in remains["bigquery"]["until"]

    # The same key makes a new job afterwards: the idempotency record went with the job.
    again = submit(intake, {"submission_id": "s4", "answer": "y", "rubric": "light"}, "k4")
    assert again == fourth and adapters.store.get(again) is not None
    assert intake.delete("/v1/students/ada", headers=AUTH).get_json()["removed"]["jobs"] == []


def test_one_submission_is_erased_even_while_it_waits_for_grading(
    erasing: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    intake = create_intake(erasing, adapters, clock).test_client()
    job_id = submit(intake, {"submission_id": "s1", "answer": "x", "rubric": "light"}, "k1")
    answer = intake.delete(f"/v1/grading-jobs/{job_id}", headers=AUTH)
    assert answer.status_code == 200, answer.get_json()
    assert answer.get_json()["removed"]["jobs"] == [job_id]
    assert answer.get_json()["removed"]["results"] == 0
    assert adapters.store.get(job_id) is None
    assert intake.delete(f"/v1/grading-jobs/{job_id}", headers=AUTH).status_code == 404


def _all(adapters: Adapters) -> list[Any]:
    from shared.ports import JobQuery

    return adapters.store.list_jobs(JobQuery(client_id="client-a", limit=100))


def test_the_bigquery_statement_names_only_checked_table_and_job_ids() -> None:
    assert bigquery_statement("p.d.t", ["abc", "d-2"]) == (
        "DELETE FROM `p.d.t` WHERE JSON_VALUE(data, '$.job_id') IN ('abc', 'd-2')"
    )
    assert bigquery_statement("p.d.t", []) == ""
    with pytest.raises(ValueError):
        bigquery_statement("p.d.t", ["x') OR TRUE --"])
    with pytest.raises(ValueError):
        bigquery_statement("p.d.t` WHERE TRUE --", ["abc"])


def test_the_admin_command_prints_the_statement(capsys: pytest.CaptureFixture[str]) -> None:
    from services.intake.students.erasure_admin import main

    assert main(["--table", "p.d.t", "abc", "def"]) == 0
    assert capsys.readouterr().out.strip() == (
        "DELETE FROM `p.d.t` WHERE JSON_VALUE(data, '$.job_id') IN ('abc', 'def')"
    )
    assert main(["--table", "p.d.t", "x') OR TRUE --"]) == 2


def uploaded_for(intake: FlaskClient, student: str | None, data: bytes) -> dict[str, Any]:
    """An upload made for `student` (or none), sent; the reference a job names."""
    asked: dict[str, Any] = {"content_type": "text/plain", "size": len(data)}
    if student is not None:
        asked["student_id"] = student
    answer = intake.post("/v1/uploads", json=asked, headers=AUTH)
    assert answer.status_code == 201, answer.get_json()
    assert _put(intake, answer.get_json(), data).status_code == 200
    return {
        "upload_id": answer.get_json()["upload_id"],
        "content_type": "text/plain",
        "size": len(data),
    }


def stored_files(settings: Settings) -> set[str]:
    root = settings.data_dir / "uploads"
    return {p.name for p in root.rglob("up_*") if not p.name.endswith(".json")}


def test_a_students_uploads_are_erased_whether_a_job_names_them_or_not(
    erasing: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    intake = create_intake(erasing, adapters, clock).test_client()
    named = uploaded_for(intake, "ada", b"light")
    never_named = uploaded_for(intake, "ada", b"draft")
    bobs = uploaded_for(intake, "bob", b"other")
    nobodys = uploaded_for(intake, None, b"plain")
    job = submit(
        intake,
        {"submission_id": "s1", "rubric": "light", "files": [named], "student_id": "ada"},
        "k1",
    )
    ids = {u["upload_id"] for u in (named, never_named, bobs, nobodys)}
    assert stored_files(erasing) == ids

    answer = intake.delete("/v1/students/ada", headers=AUTH)

    assert answer.status_code == 200, answer.get_json()
    removed = answer.get_json()["removed"]
    assert removed["jobs"] == [job]
    assert sorted(name.rsplit("/", 1)[-1] for name in removed["uploads"]) == sorted(
        [named["upload_id"], never_named["upload_id"]]
    )
    assert stored_files(erasing) == {bobs["upload_id"], nobodys["upload_id"]}
    uploads = erasing.data_dir / "uploads"
    left = [p for p in uploads.rglob("*") if p.is_file()]
    assert len(left) == 4  # bob's and nobody's, each with its metadata
    assert not any(b"light" in p.read_bytes() or b"draft" in p.read_bytes() for p in left)


def test_an_upload_made_for_a_student_is_named_by_that_students_submissions_only(
    erasing: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    intake = create_intake(erasing, adapters, clock).test_client()
    adas = uploaded_for(intake, "ada", b"light")
    body = {"submission_id": "s1", "rubric": "light", "files": [adas]}
    for other, key in ((None, "k1"), ("bob", "k2")):
        sent = {**body, "student_id": other} if other else body
        refused = intake.post(
            "/v1/grading-jobs", json=sent, headers={**AUTH, "Idempotency-Key": key}
        )
        assert refused.status_code == 422, refused.get_json()
        assert refused.get_json()["type"].endswith("upload-not-found")
    # Uploads made for no student stay nameable by any submission, a student's included.
    plain = uploaded_for(intake, None, b"plain")
    submit(intake, {**body, "files": [plain], "student_id": "bob"}, "k3")
    submit(intake, {**body, "student_id": "ada"}, "k4")


def test_the_tombstoned_subscribers_are_the_services_that_record_events() -> None:
    from services.analytics.recorder import SUBSCRIBER as ANALYTICS
    from services.notification.notifier import SUBSCRIBER as NOTIFICATION
    from shared.domain.erasure import RECORDING_SUBSCRIBERS

    assert sorted(RECORDING_SUBSCRIBERS) == sorted([ANALYTICS, NOTIFICATION])
