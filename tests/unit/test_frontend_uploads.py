"""The reference frontend's uploads: relayed with the server's key, remembered per browser
session, and only this session's uploads may be named in a submission."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests_mock
from flask.testing import FlaskClient

from localcloud.frontend.app import MAX_UPLOAD_BYTES, create_app

INTAKE = "http://127.0.0.1:9"
GRANT = {
    "upload_id": "up_photo1",
    "upload_url": f"{INTAKE}/v1/blobs/uploads/x/up_photo1?signature=s",
    "method": "PUT",
    "headers": {"Content-Type": "image/jpeg"},
    "expires_at": "2026-01-01T00:10:00Z",
}


@pytest.fixture
def intake() -> Any:
    with requests_mock.Mocker() as mock:
        mock.post(f"{INTAKE}/v1/uploads", status_code=201, json=GRANT)
        mock.post(f"{INTAKE}/v1/grading-jobs", status_code=202, json={"id": "j1"})
        yield mock


def browser() -> FlaskClient:
    return create_app(INTAKE, "secret-key", session_key="test-session-key").test_client()


def _upload(client: FlaskClient, **body: Any) -> Any:
    return client.post("/api/uploads", json={"content_type": "image/jpeg", "size": 900, **body})


def test_an_upload_is_relayed_with_the_servers_key(intake: Any) -> None:
    response = _upload(browser())
    assert response.status_code == 201
    assert json.loads(response.data)["upload_url"] == GRANT["upload_url"]
    sent = intake.request_history[0]
    assert sent.headers["Authorization"] == "Bearer secret-key"
    assert json.loads(sent.body) == {"content_type": "image/jpeg", "size": 900}


def test_a_submission_names_the_sessions_upload_with_its_declared_type_and_size(
    intake: Any,
) -> None:
    client = browser()
    _upload(client)
    files = [{"upload_id": "up_photo1", "name": "page.jpg", "size": 1, "content_type": "x/y"}]
    body = {"submission_id": "web-1", "files": files}
    response = client.post("/api/submissions", json=body, headers={"Idempotency-Key": "k-1"})
    assert response.status_code == 202
    sent = json.loads(intake.request_history[-1].body)
    # Type and size are what this session declared, whatever the page sends now.
    assert sent["files"] == [
        {"upload_id": "up_photo1", "content_type": "image/jpeg", "size": 900, "name": "page.jpg"}
    ]
    assert sent["answer"] == ""


def test_another_sessions_upload_cannot_be_named(intake: Any) -> None:
    _upload(browser())
    stranger = browser()
    body = {"submission_id": "web-1", "files": [{"upload_id": "up_photo1"}]}
    response = stranger.post("/api/submissions", json=body, headers={"Idempotency-Key": "k-1"})
    assert response.status_code == 400
    assert all("grading-jobs" not in r.url for r in intake.request_history)


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"content_type": "application/x-msdownload"}, 415),
        ({"content_type": "application/zip"}, 415),
        ({"size": MAX_UPLOAD_BYTES + 1}, 413),
        ({"size": 0}, 413),
        ({"size": True}, 413),
    ],
)
def test_what_a_student_may_not_upload_never_reaches_the_intake(
    intake: Any, body: dict[str, Any], status: int
) -> None:
    assert _upload(browser(), **body).status_code == status
    assert intake.request_history == []


def test_a_submission_needs_an_answer_or_a_file(intake: Any) -> None:
    response = browser().post(
        "/api/submissions", json={"submission_id": "web-1"}, headers={"Idempotency-Key": "k"}
    )
    assert response.status_code == 400
