"""The reference frontend's backend relays to the intake with its key and the page's
Idempotency-Key, and passes back what the page needs."""

from __future__ import annotations

import requests_mock

from localcloud.frontend.app import create_app

INTAKE = "http://127.0.0.1:9"


def test_a_submission_is_relayed_with_the_key_and_the_pages_idempotency_key() -> None:
    client = create_app(INTAKE, "secret-key").test_client()
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
        response = client.post(
            "/api/submissions", data=b'{"answer": "a"}', headers={"Idempotency-Key": "k-1"}
        )
        sent = mock.request_history[0]
    assert response.status_code == 202
    assert response.get_json() == {"id": "j1", "status": "PENDING"}
    assert response.headers["Retry-After"] == "2"
    assert response.headers["Idempotent-Replayed"] == "true"
    assert "X-Internal" not in response.headers
    assert sent.headers["Authorization"] == "Bearer secret-key"
    assert sent.headers["Idempotency-Key"] == "k-1"
    assert sent.body == b'{"answer": "a"}'


def test_status_is_relayed_and_problems_pass_through() -> None:
    client = create_app(INTAKE, "secret-key").test_client()
    with requests_mock.Mocker() as mock:
        mock.get(
            f"{INTAKE}/v1/grading-jobs/nope",
            status_code=404,
            json={"type": "https://gradeq.dev/problems/job-not-found"},
            headers={"Content-Type": "application/problem+json"},
        )
        response = client.get("/api/submissions/nope")
        assert mock.request_history[0].headers["Authorization"] == "Bearer secret-key"
    assert response.status_code == 404
    assert response.mimetype == "application/problem+json"
    assert client.get("/healthz").get_json() == {"status": "ok"}
    with client.get("/") as page:
        assert b"static/app.js" in page.data
