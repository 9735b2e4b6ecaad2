"""The intake HTTP contract: 202 + Location, idempotency, errors as problem documents."""

from __future__ import annotations

from typing import Any

import pytest
from flask.testing import FlaskClient

from services.intake.app import create_app
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.errors import PROBLEM_BASE
from tests.fakes import FakeTaskQueue
from tests.unit.conftest import API_KEY, OTHER_KEY

BODY: dict[str, Any] = {
    "submission_id": "sub-42",
    "assignment_id": "hw-1",
    "answer": "Plants use photosynthesis; chlorophyll absorbs light.",
    "rubric": ["mentions photosynthesis", "explains chlorophyll absorbs light"],
    "max_score": 10,
    "metadata": {"course": "bio"},
}


@pytest.fixture
def client(settings: Settings, adapters: Adapters, clock: FrozenClock) -> FlaskClient:
    return create_app(settings, adapters, clock).test_client()


def post(client: FlaskClient, body: Any = BODY, key: str | None = "k-1", **kw: Any) -> Any:
    headers = {"Authorization": f"Bearer {kw.pop('api_key', API_KEY)}"}
    if key is not None:
        headers["Idempotency-Key"] = key
    headers.update(kw.pop("headers", {}))
    if "data" in kw:
        return client.post("/v1/grading-jobs", headers=headers, **kw)
    return client.post("/v1/grading-jobs", json=body, headers=headers, **kw)


def queue_of(adapters: Adapters) -> FakeTaskQueue:
    assert isinstance(adapters.queue, FakeTaskQueue)
    return adapters.queue


def assert_problem(response: Any, status: int, slug: str) -> dict[str, Any]:
    assert response.status_code == status, response.get_json()
    assert response.mimetype == "application/problem+json"
    body: dict[str, Any] = response.get_json()
    assert body["type"] == PROBLEM_BASE + slug
    assert body["status"] == status
    return body


def test_new_key_is_accepted_with_location_and_one_task(
    client: FlaskClient, adapters: Adapters
) -> None:
    response = post(client)
    assert response.status_code == 202
    job = response.get_json()
    assert job["status"] == "PENDING"
    assert job["attempts"] == 0
    assert response.headers["Location"] == f"/v1/grading-jobs/{job['id']}"
    assert int(response.headers["Retry-After"]) >= 1
    assert [t.job_id for t in queue_of(adapters).tasks] == [job["id"]]


def test_same_key_same_body_returns_the_same_job_and_no_second_task(
    client: FlaskClient, adapters: Adapters
) -> None:
    first = post(client)
    second = post(client)
    assert second.status_code == 202
    assert second.headers["Location"] == first.headers["Location"]
    assert second.headers["Idempotent-Replayed"] == "true"
    assert second.get_json()["id"] == first.get_json()["id"]
    assert len(queue_of(adapters).tasks) == 1


def test_same_key_other_client_is_another_job(client: FlaskClient) -> None:
    mine = post(client).get_json()["id"]
    theirs = post(client, api_key=OTHER_KEY).get_json()["id"]
    assert mine != theirs


def test_same_key_different_body_is_422(client: FlaskClient, adapters: Adapters) -> None:
    post(client)
    response = post(client, body={**BODY, "answer": "something else"})
    assert_problem(response, 422, "idempotency-key-reused")
    assert len(queue_of(adapters).tasks) == 1


@pytest.mark.parametrize("key", [None, "", "has space", "x" * 256, "caf\u00e9"])
def test_missing_or_malformed_key_is_400_and_nothing_stored(
    client: FlaskClient, adapters: Adapters, key: str | None
) -> None:
    headers = {"Idempotency-Key": key} if key is not None else {}
    response = post(client, key=None, headers=headers)
    assert_problem(response, 400, "idempotency-key-invalid")
    assert queue_of(adapters).tasks == []


def test_bad_fields_are_listed(client: FlaskClient, adapters: Adapters) -> None:
    body = {**BODY, "submission_id": 7, "max_score": 0, "surprise": True}
    del body["answer"]
    response = post(client, body=body)
    problem = assert_problem(response, 400, "validation-error")
    fields = {e["field"] for e in problem["errors"]}
    assert fields == {"submission_id", "max_score", "surprise", "answer"}
    assert queue_of(adapters).tasks == []


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"answer": "x" * (100 * 1024 + 1)}, "answer"),
        ({"callback_url": "http://example.com/hook"}, "callback_url"),
        ({"metadata": {"blob": "y" * 5000}}, "metadata"),
        ({"rubric": []}, "rubric"),
    ],
)
def test_limits_are_enforced(client: FlaskClient, change: dict[str, Any], field: str) -> None:
    problem = assert_problem(post(client, body={**BODY, **change}), 400, "validation-error")
    assert {e["field"] for e in problem["errors"]} == {field}


def test_malformed_json_is_400(client: FlaskClient, adapters: Adapters) -> None:
    response = post(client, data="{not json", content_type="application/json")
    assert_problem(response, 400, "validation-error")
    assert queue_of(adapters).tasks == []


def test_not_json_is_415(client: FlaskClient) -> None:
    response = post(client, data="answer=1", content_type="application/x-www-form-urlencoded")
    assert_problem(response, 415, "unsupported-media-type")


def test_too_large_is_413(client: FlaskClient, adapters: Adapters) -> None:
    response = post(client, data="x" * (200 * 1024), content_type="application/json")
    assert_problem(response, 413, "payload-too-large")
    assert queue_of(adapters).tasks == []


def test_missing_or_wrong_api_key_is_401(client: FlaskClient) -> None:
    assert_problem(post(client, api_key="wrong"), 401, "unauthenticated")
    response = client.get("/v1/grading-jobs/abc")
    assert_problem(response, 401, "unauthenticated")


def test_get_returns_the_job_with_retry_after_while_pending(client: FlaskClient) -> None:
    location = post(client).headers["Location"]
    response = client.get(location, headers={"Authorization": f"Bearer {API_KEY}"})
    assert response.status_code == 200
    job = response.get_json()
    assert job["status"] == "PENDING"
    assert job["submission_id"] == "sub-42"
    assert set(job["timings"]) == {"queue_wait_ms", "processing_ms", "total_ms"}
    assert "Retry-After" in response.headers


def test_unknown_id_and_other_clients_job_are_404(client: FlaskClient) -> None:
    location = post(client).headers["Location"]
    other = client.get(location, headers={"Authorization": f"Bearer {OTHER_KEY}"})
    assert_problem(other, 404, "job-not-found")
    missing = client.get(
        "/v1/grading-jobs/doesnotexist", headers={"Authorization": f"Bearer {API_KEY}"}
    )
    assert_problem(missing, 404, "job-not-found")


def test_cancel_makes_the_job_final_and_announces_it(
    client: FlaskClient, adapters: Adapters
) -> None:
    location = post(client).headers["Location"]
    auth = {"Authorization": f"Bearer {API_KEY}"}
    response = client.post(location + "/cancel", headers=auth)
    assert response.status_code == 200
    assert response.get_json()["status"] == "CANCELLED"
    assert "Retry-After" not in response.headers
    again = client.post(location + "/cancel", headers=auth)
    assert again.status_code == 200 and again.get_json() == response.get_json()
    events = adapters.publisher.events  # type: ignore[attr-defined]
    assert [e.outcome.value for e in events] == ["cancelled"]


def test_queue_outage_is_503_and_a_retry_enqueues(client: FlaskClient, adapters: Adapters) -> None:
    queue_of(adapters).available = False
    assert_problem(post(client), 503, "dependency-unavailable")
    queue_of(adapters).available = True
    response = post(client)
    assert response.status_code == 202
    assert len(queue_of(adapters).tasks) == 1


def test_health_and_readiness(client: FlaskClient, adapters: Adapters) -> None:
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 200
    queue_of(adapters).available = False
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.get_json()["checks"]["queue"] != "ok"
