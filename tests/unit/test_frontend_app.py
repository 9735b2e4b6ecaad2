"""The reference frontend's backend builds the intake request from what a student may set,
relays it with its key and the page's Idempotency-Key, and serves only the jobs the
browser session submitted."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests_mock
from flask.testing import FlaskClient

from localcloud.frontend.app import Assignment, create_app

INTAKE = "http://127.0.0.1:9"
ANSWER = {"submission_id": "web-1", "answer": "a"}


@pytest.fixture
def intake() -> Any:
    with requests_mock.Mocker() as mock:
        mock.post(
            f"{INTAKE}/v1/grading-jobs",
            status_code=202,
            json={"id": "j1", "status": "PENDING"},
            headers={
                "Content-Type": "application/json",
                "Retry-After": "2",
                "Idempotent-Replayed": "true",
                "X-Internal": "no",
            },
        )
        mock.get(
            f"{INTAKE}/v1/grading-jobs/j1",
            json={"id": "j1", "status": "RUNNING"},
            headers={"Content-Type": "application/json"},
        )
        yield mock


def browser() -> FlaskClient:
    return create_app(INTAKE, "secret-key", session_key="test-session-key").test_client()


def test_a_submission_is_relayed_with_the_key_and_the_pages_idempotency_key(intake: Any) -> None:
    client = browser()
    response = client.post("/api/submissions", json=ANSWER, headers={"Idempotency-Key": "k-1"})
    sent = intake.request_history[0]
    assert response.status_code == 202
    assert response.get_json() == {"id": "j1", "status": "PENDING"}
    assert response.headers["Retry-After"] == "2"
    assert response.headers["Idempotent-Replayed"] == "true"
    assert "X-Internal" not in response.headers
    assert sent.headers["Authorization"] == "Bearer secret-key"
    assert sent.headers["Idempotency-Key"].endswith(":k-1")
    again = client.post("/api/submissions", json=ANSWER, headers={"Idempotency-Key": "k-1"})
    assert again.status_code == 202  # the retry carries the same key to the intake
    assert intake.request_history[1].headers["Idempotency-Key"] == sent.headers["Idempotency-Key"]


def test_the_request_is_built_from_the_server_config_not_the_visitor(intake: Any) -> None:
    client = browser()
    visitor = {
        **ANSWER,
        "callback_url": "https://attacker.example/collect",
        "max_score": 1000,
        "rubric": ["says hello"],
        "assignment_id": "someone-elses",
        "metadata": {"simulate": {"failure": "permanent"}},
    }
    client.post("/api/submissions", json=visitor, headers={"Idempotency-Key": "k-1"})
    sent = json.loads(intake.request_history[0].body)
    fixed = Assignment()
    assert sent == {
        "submission_id": "web-1",
        "assignment_id": fixed.assignment_id,
        "answer": "a",
        "rubric": list(fixed.rubric),
        "max_score": fixed.max_score,
    }


@pytest.mark.parametrize(
    ("body", "key"),
    [
        ({"submission_id": "web-1"}, "k"),
        ({"submission_id": "web-1", "answer": ["not", "text"]}, "k"),
        ({"submission_id": "../../admin", "answer": "a"}, "k"),
        (ANSWER, ""),
    ],
    ids=["no-answer", "answer-not-text", "bad-reference", "no-idempotency-key"],
)
def test_what_a_student_may_not_send_is_refused_here(
    intake: Any, body: dict[str, Any], key: str
) -> None:
    response = browser().post("/api/submissions", json=body, headers={"Idempotency-Key": key})
    assert response.status_code == 400 and response.mimetype == "application/problem+json"
    assert intake.call_count == 0


def test_only_the_jobs_this_browser_submitted_are_served(intake: Any) -> None:
    mine, stranger = browser(), browser()
    mine.post("/api/submissions", json=ANSWER, headers={"Idempotency-Key": "k-1"})
    assert mine.get("/api/submissions/j1").get_json() == {"id": "j1", "status": "RUNNING"}
    refused = stranger.get("/api/submissions/j1")
    assert refused.status_code == 404 and refused.mimetype == "application/problem+json"
    assert browser().get("/api/submissions/any-other-id").status_code == 404
    assert [r.method for r in intake.request_history] == ["POST", "GET"]


def test_two_browsers_with_the_same_idempotency_key_stay_apart(intake: Any) -> None:
    for client in (browser(), browser()):
        client.post("/api/submissions", json=ANSWER, headers={"Idempotency-Key": "same"})
    first, second = (r.headers["Idempotency-Key"] for r in intake.request_history)
    assert first != second


def test_status_problems_pass_through(intake: Any) -> None:
    client = browser()
    client.post("/api/submissions", json=ANSWER, headers={"Idempotency-Key": "k-1"})
    intake.get(
        f"{INTAKE}/v1/grading-jobs/j1",
        status_code=404,
        json={"type": "https://gradeq.dev/problems/job-not-found"},
        headers={"Content-Type": "application/problem+json"},
    )
    response = client.get("/api/submissions/j1")
    assert intake.request_history[-1].headers["Authorization"] == "Bearer secret-key"
    assert response.status_code == 404
    assert response.mimetype == "application/problem+json"
    assert client.get("/healthz").get_json() == {"status": "ok"}
    with client.get("/") as page:
        assert b"static/app.js" in page.data


def test_the_class_page_relays_an_assignments_progress_with_the_key(intake: Any) -> None:
    progress = {"id": "a-1", "title": "t", "progress": {"done": False, "histogram": [0] * 11}}
    intake.get(
        f"{INTAKE}/v1/assignments/a-1",
        json=progress,
        headers={"Content-Type": "application/json", "Retry-After": "1"},
    )
    client = browser()
    with client.get("/class") as page:
        assert b"static/class.js" in page.data
    response = client.get("/api/assignments/a-1")
    assert response.status_code == 200 and response.get_json() == progress
    assert response.headers["Retry-After"] == "1"
    assert intake.request_history[-1].headers["Authorization"] == "Bearer secret-key"
    refused = client.get("/api/assignments/a b")  # not an id: never sent on
    assert refused.status_code == 404
    assert intake.request_history[-1].url.endswith("/v1/assignments/a-1")


def test_an_anonymous_visitor_sees_an_assignments_title_and_progress_never_its_rubric(
    intake: Any,
) -> None:
    progress = {"round": 1, "submissions": 3, "final": 1, "done": False, "histogram": [0] * 11}
    full = {
        "id": "a-1",
        "title": "Photosynthesis",
        "max_score": 10,
        "prompt_version": "grading-v1",
        "rubric": {"version": 2, "rubric": ["names the secret criterion"], "max_score": 10},
        "rubric_versions": [{"version": 1, "rubric": ["an older secret criterion"]}],
        "created_at": "2026-11-29T09:30:00Z",
        "updated_at": "2026-11-29T09:30:00Z",
        "progress": progress,
        "review": {"confidence_below": 0.6},
    }
    intake.get(
        f"{INTAKE}/v1/assignments/a-1",
        json=full,
        headers={"Content-Type": "application/json", "Retry-After": "1"},
    )
    response = browser().get("/api/assignments/a-1")  # no session, no sign-in
    assert response.status_code == 200
    assert response.get_json() == {
        "id": "a-1",
        "title": "Photosynthesis",
        "max_score": 10,
        "progress": progress,
    }
    assert b"secret criterion" not in response.data
    assert response.headers["Retry-After"] == "1"
