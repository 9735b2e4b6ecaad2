"""The review API: the queue of held grades, one grade, accept or override, exactly-once
GradeReviewed, the withheld GradingCompleted at review time, and reviewers kept to their client."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest
from flask.testing import FlaskClient

from services.intake.app import create_app as create_intake
from services.worker.app import create_app as create_worker
from shared.adapters.graders.rubric import RubricGrader
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.codecs.cloudevent import to_pubsub
from shared.config.settings import Settings
from shared.domain.events import GradeReviewed, GradingCompleted
from shared.domain.job import Job
from shared.domain.review import ReviewDecision, ReviewStatus
from shared.service_layer.review import ReviewService
from tests.fakes import FakePublisher, FakeTaskQueue
from tests.unit.conftest import API_KEY, OTHER_KEY
from tests.unit.test_assignment_flow import deliver_all
from tests.unit.test_review_rules import create_assignment, submit

AUTH = {"Authorization": f"Bearer {API_KEY}"}
REVIEWER = {"Authorization": "Bearer reviewer-a-secret"}
OTHER_REVIEWER = {"Authorization": "Bearer reviewer-b-secret"}


@pytest.fixture
def reviewing(settings: Settings) -> Settings:
    keys = "client-a/ms-smith=reviewer-a-secret,client-b/mr-jones=reviewer-b-secret"
    return Settings(**{**settings.model_dump(), "reviewer_keys": keys})


def graded_assignment(
    settings: Settings, adapters: Adapters, clock: FrozenClock, release: str, answers: list[str]
) -> tuple[FlaskClient, list[str], FakePublisher]:
    intake = create_intake(settings, adapters, clock).test_client()
    worker = create_worker(settings, adapters, RubricGrader(simulate=False), clock).test_client()
    queue, publisher = adapters.queue, adapters.publisher
    assert isinstance(queue, FakeTaskQueue) and isinstance(publisher, FakePublisher)
    assignment_id = create_assignment(intake, {"sample_rate": 1, "release": release})
    job_ids = submit(intake, assignment_id, answers)
    deliver_all(worker, queue)
    return intake, job_ids, publisher


def events(publisher: FakePublisher, kind: type[Any]) -> list[Any]:
    return [e for e in publisher.events if isinstance(e, kind)]


def test_the_queue_lists_held_grades_oldest_first_in_cursor_pages(
    reviewing: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    intake, job_ids, _ = graded_assignment(
        reviewing, adapters, clock, "immediately", ["light", "chlorophyll", "light chlorophyll"]
    )
    seen: list[str] = []
    cursor = None
    while True:
        query = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = intake.get("/v1/reviews", query_string=query, headers=REVIEWER).get_json()
        seen += [r["job_id"] for r in page["reviews"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    held = sorted(
        (adapters.store.get(j) for j in job_ids),
        key=lambda j: (j.review.to_dict()["held_at"], j.id),  # type: ignore[union-attr]
    )
    assert seen == [j.id for j in held if j is not None]
    assert len(seen) == 3
    other = intake.get("/v1/reviews", query_string={"assignment_id": "a-none"}, headers=REVIEWER)
    assert other.get_json()["reviews"] == []


def test_an_override_after_review_releases_the_teachers_grade_with_one_of_each_event(
    reviewing: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    intake, [job_id], publisher = graded_assignment(
        reviewing, adapters, clock, "after_review", ["light only"]
    )
    assert events(publisher, GradingCompleted) == []  # withheld until the review
    detail = intake.get(f"/v1/reviews/{job_id}", headers=REVIEWER).get_json()
    assert detail["answer"] == "light only" and detail["rubric"] == ["light", "chlorophyll"]
    assert detail["model_result"]["score"] == 5.0 and detail["reasons"] == ["sampled"]

    body = {"decision": "override", "score": 7.5, "reason": "partial credit", "feedback": "Good."}
    reviewed = intake.post(f"/v1/reviews/{job_id}", json=body, headers=REVIEWER)
    assert reviewed.status_code == 200, reviewed.get_json()
    assert reviewed.get_json()["result"]["score"] == 7.5
    assert reviewed.get_json()["model_result"]["score"] == 5.0  # both kept

    job = adapters.store.get(job_id)
    assert job is not None and job.review is not None and job.result is not None
    assert job.result.score == 5.0 and job.review.status is ReviewStatus.REVIEWED
    [record] = job.review.reviews
    assert (record.by, record.decision, record.reason) == (
        "key:ms-smith",
        ReviewDecision.OVERRIDE,
        "partial credit",
    )
    assert record.at == clock.now()
    student = intake.get(f"/v1/grading-jobs/{job_id}", headers=AUTH).get_json()
    assert student["result"]["score"] == 7.5 and student["result"]["feedback"] == "Good."
    assert student["review"] == {
        "status": "reviewed",
        "reviewed_at": record.at.isoformat().replace("+00:00", "Z"),
        "decision": "override",
    }
    [completed] = events(publisher, GradingCompleted)
    [event] = events(publisher, GradeReviewed)
    assert completed.score == 7.5 and completed.job_id == job_id
    assert (event.model_score, event.score, event.review) == (5.0, 7.5, 1)
    to_pubsub(event)  # the payload matches its schema

    # A crash after the review's write, before its events were marked: published again
    # with the same ids (subscribers dedupe), and then never again.
    service: ReviewService = intake.application.extensions["gradeq.reviews"]

    def unannounced(j: Job) -> Job:
        assert j.review is not None
        return dataclasses.replace(j, review=dataclasses.replace(j.review, announced=False))

    unmarked = adapters.store.update(job_id, unannounced)
    service.announce_pending(unmarked)
    service.announce_pending(adapters.store.get(job_id))  # type: ignore[arg-type]
    ids = [e.event_id for e in publisher.events if isinstance(e, GradeReviewed | GradingCompleted)]
    assert sorted(ids) == sorted([completed.event_id, event.event_id] * 2)

    # A second review is an event of its own.
    accept = intake.post(
        f"/v1/reviews/{job_id}", json={"decision": "accept", "reason": "ok"}, headers=REVIEWER
    )
    assert accept.status_code == 200
    second = events(publisher, GradeReviewed)[-1]
    assert second.review == 2 and second.event_id != event.event_id
    assert len(events(publisher, GradingCompleted)) == 2  # only the replayed duplicate


def bearer_of(credential: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {credential}"}


def test_a_reviewer_never_sees_another_clients_grades(
    reviewing: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    intake, [job_id], _ = graded_assignment(
        reviewing, adapters, clock, "immediately", ["light only"]
    )
    assert intake.get("/v1/reviews", headers=OTHER_REVIEWER).get_json()["reviews"] == []
    assert intake.get(f"/v1/reviews/{job_id}", headers=OTHER_REVIEWER).status_code == 404
    body = {"decision": "override", "score": 0, "reason": "mine now"}
    refused = intake.post(f"/v1/reviews/{job_id}", json=body, headers=OTHER_REVIEWER)
    assert refused.status_code == 404
    # Another school's server key reviews its own school's grades, never these.
    as_client = intake.get("/v1/reviews", headers={"Authorization": f"Bearer {OTHER_KEY}"})
    assert as_client.status_code == 200 and as_client.get_json()["reviews"] == []
    assert intake.get(f"/v1/reviews/{job_id}", headers=bearer_of(OTHER_KEY)).status_code == 404
    job = adapters.store.get(job_id)
    assert job is not None and job.review is not None and job.review.reviews == ()


def test_an_override_is_checked(
    reviewing: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    intake, [job_id], _ = graded_assignment(
        reviewing, adapters, clock, "immediately", ["light only"]
    )
    url = f"/v1/reviews/{job_id}"
    for body in (
        {"decision": "override", "score": 11, "reason": "too high"},
        {"decision": "override", "score": 3},
        {"decision": "accept", "score": 3},
    ):
        answer = intake.post(url, json=body, headers=REVIEWER)
        assert answer.status_code == 400, body


def test_the_recovery_sweep_publishes_a_review_a_crash_left_unannounced(
    reviewing: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    intake, [job_id], publisher = graded_assignment(
        reviewing, adapters, clock, "after_review", ["light only"]
    )
    body = {"decision": "override", "score": 6, "reason": "fair"}
    publisher.failures = 1  # the bus is down when the review is made: its events are not out
    failed = intake.post(f"/v1/reviews/{job_id}", json=body, headers=REVIEWER)
    assert failed.status_code == 503, failed.get_json()
    job = adapters.store.get(job_id)
    assert job is not None and job.review is not None and not job.review.announced
    assert events(publisher, GradeReviewed) == []

    worker = create_worker(reviewing, adapters, RubricGrader(simulate=False), clock)
    recovery = worker.extensions["gradeq.recovery"]
    assert job_id not in recovery.sweep().announced  # its own request may still publish
    clock.advance(timedelta(minutes=2))
    assert job_id in recovery.sweep().announced
    assert job_id not in recovery.sweep().announced  # marked: never again
    [event] = events(publisher, GradeReviewed)
    [completed] = events(publisher, GradingCompleted)
    assert (event.score, completed.score) == (6, 6)


def test_reviewers_read_the_agreement_of_their_own_client_only(
    reviewing: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    intake, [job_id], _ = graded_assignment(
        reviewing, adapters, clock, "immediately", ["light only"]
    )
    body = {"decision": "override", "score": 7, "reason": "more right than wrong"}
    assert intake.post(f"/v1/reviews/{job_id}", json=body, headers=REVIEWER).status_code == 200
    mine = intake.get("/v1/reviews:agreement", headers=REVIEWER).get_json()
    assert (mine["reviewed"], mine["pairs"]) == (1, [[5.0, 7.0]])
    assert mine["mean_absolute_difference"] == 2.0 and mine["exact_match_rate"] == 0.0
    theirs = intake.get("/v1/reviews:agreement", headers=OTHER_REVIEWER).get_json()
    assert (theirs["reviewed"], theirs["pairs"]) == (0, [])
