"""Posting, as Canvas does it: an assignment posts each grade once final, or when its
teacher posts it (all, or chosen submissions); every posted version is one GradePosted
with a stable id, and nothing reaches a student or the webhook before its post."""

from __future__ import annotations

from collections import Counter
from typing import Any

from flask.testing import FlaskClient

from services.intake.app import create_app as create_intake
from services.worker.app import create_app as create_worker
from shared.adapters.graders.rubric import RubricGrader
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.codecs.cloudevent import GRADE_POSTED_TYPE, to_pubsub
from shared.config.settings import Settings
from shared.domain.events import GradePosted, GradingCompleted
from shared.domain.ids import grade_posted_event_id
from tests.fakes import FakePublisher, FakeTaskQueue
from tests.unit.test_assignment_flow import deliver_all
from tests.unit.test_review_api import AUTH, REVIEWER, reviewing  # noqa: F401
from tests.unit.test_review_rules import submit

ANSWERS = ["light only", "light and chlorophyll", "nothing"]


def stack(
    settings: Settings, adapters: Adapters, clock: FrozenClock, **assignment: Any
) -> tuple[FlaskClient, FlaskClient, str, FakeTaskQueue, FakePublisher]:
    intake = create_intake(settings, adapters, clock).test_client()
    worker = create_worker(settings, adapters, RubricGrader(simulate=False), clock).test_client()
    queue, publisher = adapters.queue, adapters.publisher
    assert isinstance(queue, FakeTaskQueue) and isinstance(publisher, FakePublisher)
    body = {"title": "Essay", "rubric": "light; chlorophyll", "max_score": 10, **assignment}
    created = intake.post("/v1/assignments", json=body, headers={**AUTH, "Idempotency-Key": "a"})
    assert created.status_code == 201, created.get_json()
    return intake, worker, str(created.get_json()["id"]), queue, publisher


def of(publisher: FakePublisher, kind: type[Any]) -> list[Any]:
    return [e for e in publisher.events if isinstance(e, kind)]


def post(intake: FlaskClient, assignment_id: str, chosen: list[str] | None = None) -> Any:
    body = {} if chosen is None else {"submission_ids": chosen}
    response = intake.post(f"/v1/assignments/{assignment_id}/grades:post", json=body, headers=AUTH)
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def test_manual_posting_keeps_grades_from_students_and_webhooks_until_posted(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    intake, worker, assignment_id, queue, publisher = stack(
        settings, adapters, clock, posting="manual"
    )
    job_ids = submit(intake, assignment_id, ANSWERS)
    deliver_all(worker, queue)
    assert of(publisher, GradingCompleted) == [] and of(publisher, GradePosted) == []
    seen = intake.get(f"/v1/grading-jobs/{job_ids[0]}", headers=AUTH).get_json()
    assert seen["status"] == "SUCCEEDED" and "result" not in seen
    sheet = intake.get(f"/v1/assignments/{assignment_id}/grades", headers=AUTH).get_json()
    assert {g["posted_at"] for g in sheet["grades"]} == {None}  # the teacher sees them

    assert post(intake, assignment_id, ["s0"])["posted"] == ["s0"]
    [completed] = of(publisher, GradingCompleted)
    [posted] = of(publisher, GradePosted)
    assert completed.job_id == posted.job_id == job_ids[0]
    assert (posted.version, posted.score, posted.source) == (1, 5.0, "model")
    assert posted.event_id == grade_posted_event_id(job_ids[0], 1)
    assert posted.grading_progress == "FullyGraded"
    seen = intake.get(f"/v1/grading-jobs/{job_ids[0]}", headers=AUTH).get_json()
    assert seen["result"]["score"] == 5.0
    assert "result" not in intake.get(f"/v1/grading-jobs/{job_ids[1]}", headers=AUTH).get_json()

    everything = post(intake, assignment_id)
    assert (sorted(everything["posted"]), everything["unchanged"]) == (["s1", "s2"], ["s0"])
    assert post(intake, assignment_id)["posted"] == []  # nothing changed: no new version
    ids = Counter(e.event_id for e in of(publisher, GradePosted))
    assert len(ids) == 3 and set(ids.values()) == {1}
    assert len(of(publisher, GradingCompleted)) == 3
    data, attributes = to_pubsub(posted)  # the payload matches its schema
    assert attributes["ce-type"] == GRADE_POSTED_TYPE and data


def test_a_teachers_change_after_posting_is_its_own_version(
    reviewing: Settings,  # noqa: F811
    adapters: Adapters,
    clock: FrozenClock,
) -> None:
    intake, worker, assignment_id, queue, publisher = stack(
        reviewing, adapters, clock, posting="manual", review={"sample_rate": 1}
    )
    [job_id] = submit(intake, assignment_id, ["light only"])
    deliver_all(worker, queue)
    post(intake, assignment_id)
    [first] = of(publisher, GradePosted)
    assert first.grading_progress == "PendingManual"  # held for a teacher, released as is

    body = {"decision": "override", "score": 7.0, "reason": "partial", "feedback": "Good."}
    assert intake.post(f"/v1/reviews/{job_id}", json=body, headers=REVIEWER).status_code == 200
    second = of(publisher, GradePosted)[-1]
    assert (second.version, second.score, second.source, second.reason) == (
        2,
        7.0,
        "teacher",
        "partial",
    )
    assert second.feedback == "Good." and second.grading_progress == "FullyGraded"
    assert second.event_id == grade_posted_event_id(job_id, 2) != first.event_id
    seen = intake.get(f"/v1/grading-jobs/{job_id}", headers=AUTH).get_json()
    assert seen["result"]["score"] == 7.0
    assert post(intake, assignment_id)["unchanged"] == ["s0"]
    assert len(of(publisher, GradePosted)) == 2


def test_automatic_posting_posts_each_final_grade_and_each_change(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    intake, worker, assignment_id, queue, publisher = stack(settings, adapters, clock)
    assert intake.get(f"/v1/assignments/{assignment_id}", headers=AUTH).get_json()["posting"] == (
        "automatic"
    )
    [job_id] = submit(intake, assignment_id, ["light only"])
    deliver_all(worker, queue)
    [first] = of(publisher, GradePosted)
    assert (first.version, first.score) == (1, 5.0)
    since = len(queue.tasks)
    regrade = intake.post(
        f"/v1/assignments/{assignment_id}/regrade",
        json={"rubric": "light; chlorophyll; water"},
        headers=AUTH,
    )
    assert regrade.status_code == 202
    deliver_all(worker, queue, since)
    second = of(publisher, GradePosted)[-1]
    assert second.version == 2 and second.score != 5.0 and second.job_id == job_id
    assert len(of(publisher, GradePosted)) == 2
