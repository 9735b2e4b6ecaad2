"""The one mapping from the worker service's verdict to what the queue receives."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from flask import Flask

from services.worker.replies import STATUS, reply
from shared.codecs.task_body import MalformedTaskBody
from shared.domain.errors import DependencyUnavailable, JobLocked, JobNotFound
from shared.domain.job import GradingRequest, Job
from shared.service_layer.worker import DeliveryResult, Verdict

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def app() -> Flask:
    return Flask(__name__)


def _job() -> Job:
    request = GradingRequest(submission_id="s", answer="a", rubric="r", max_score=10)
    return Job.new("job-1", "client-a", request, "fp", NOW)


def test_every_verdict_has_the_status_cloud_tasks_acts_on() -> None:
    assert STATUS == {
        Verdict.DONE: 200,
        Verdict.DROPPED: 200,
        Verdict.RETRY: 500,
        Verdict.LOCKED: 409,
        Verdict.THROTTLED: 429,
        Verdict.DEFERRED: 200,
        Verdict.SUSPENDED: 503,
    }


def test_only_what_holds_for_every_job_asks_the_whole_queue_to_slow_down() -> None:
    # Cloud Tasks backs the whole queue off on 429 and 503: one job's failure must not.
    slowing = {verdict for verdict, status in STATUS.items() if status in (429, 503)}
    assert slowing == {Verdict.THROTTLED, Verdict.SUSPENDED}


def test_suspended_answers_503_with_the_wait_until_the_next_probe(app: Flask) -> None:
    with app.app_context():
        response = reply("job-1", DeliveryResult(Verdict.SUSPENDED, None, retry_after_s=30))
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "30"


def test_done_names_the_job_and_its_status(app: Flask) -> None:
    with app.app_context():
        response = reply("job-1", DeliveryResult(Verdict.DONE, _job()))
    assert response.status_code == 200
    assert response.get_json() == {"job_id": "job-1", "status": "PENDING"}
    assert "Retry-After" not in response.headers


def test_dropped_is_acknowledged_with_the_reason(app: Flask) -> None:
    reason = MalformedTaskBody("the body is not JSON")
    with app.app_context():
        response = reply(None, DeliveryResult(Verdict.DROPPED, None, reason=reason))
    assert response.status_code == 200
    assert response.get_json() == {
        "job_id": None,
        "status": None,
        "dropped": "the body is not JSON",
    }


def test_done_with_a_reason_does_not_claim_a_drop(app: Flask) -> None:
    with app.app_context():
        response = reply("j", DeliveryResult(Verdict.DONE, None, reason=JobNotFound("x")))
    assert "dropped" not in response.get_json()


@pytest.mark.parametrize(("seconds", "header"), [(0.2, "1"), (1.4, "1"), (2.6, "3"), (30.0, "30")])
def test_retry_passes_on_retry_after_rounded_and_at_least_one_second(
    app: Flask, seconds: float, header: str
) -> None:
    with app.app_context():
        response = reply("job-1", DeliveryResult(Verdict.RETRY, _job(), retry_after_s=seconds))
    assert response.status_code == 500
    assert response.headers["Retry-After"] == header


def test_throttled_answers_429_with_retry_after(app: Flask) -> None:
    with app.app_context():
        response = reply("job-1", DeliveryResult(Verdict.THROTTLED, _job(), retry_after_s=12))
    assert response.status_code == 429
    assert response.headers["Retry-After"] == "12"


def test_retry_without_a_hint_sends_no_retry_after(app: Flask) -> None:
    with app.app_context():
        response = reply("job-1", DeliveryResult(Verdict.RETRY, _job()))
    assert response.status_code == 500
    assert "Retry-After" not in response.headers


def test_done_never_carries_retry_after(app: Flask) -> None:
    with app.app_context():
        response = reply("job-1", DeliveryResult(Verdict.DONE, _job(), retry_after_s=5))
    assert "Retry-After" not in response.headers


def test_locked_is_a_409_problem_naming_the_lease(app: Flask) -> None:
    locked = JobLocked("job-1", NOW)
    with app.app_context():
        response = reply("job-1", DeliveryResult(Verdict.LOCKED, None, reason=locked))
    assert response.status_code == 409
    assert response.mimetype == "application/problem+json"
    body = response.get_json()
    assert body["type"] == "https://gradeq.dev/problems/job-locked"
    assert body["status"] == 409
    assert body["detail"] == "job job-1 is leased until 2026-03-01T12:00:00+00:00"


def test_locked_answers_409_whatever_status_its_reason_has_of_its_own(app: Flask) -> None:
    # The verdict decides what the queue does; a reason only explains it.
    reason = DependencyUnavailable("the lease could not be read")
    assert reason.status != 409
    with app.app_context():
        response = reply("job-1", DeliveryResult(Verdict.LOCKED, None, reason=reason))
    assert response.status_code == 409
    assert response.get_json()["status"] == 409
    assert "Retry-After" not in response.headers
