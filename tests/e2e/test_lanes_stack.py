"""Lanes through the whole local stack: a paused lane keeps its job while another lane's job
is graded, resumes it, and a purge cancels what the paused lane held."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from localcloud.emulators import missing_reason
from localcloud.stack import EMBEDDED, GOOGLE_EMULATORS, LocalStack
from tests.e2e.fast_stack import FAST_QUEUE
from tests.e2e.operator_stack import OPERATOR_KEY, operator_stack

pytestmark = pytest.mark.e2e

LANES = {
    "exam": {**FAST_QUEUE["grading"], "lane": {"priority": 300, "oldest_age_objective": "60s"}},
    "grading": {**FAST_QUEUE["grading"], "lane": {"priority": 200}},
    "bulk": {**FAST_QUEUE["grading"], "lane": {"priority": 100, "min_quota_share": 0.1}},
}


@pytest.fixture(scope="module", params=[EMBEDDED, GOOGLE_EMULATORS])
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalStack]:
    """The embedded backend, then the Google adapters (Cloud Tasks through the local
    dispatcher's gRPC API, Firestore and Pub/Sub emulators)."""
    if request.param == GOOGLE_EMULATORS and (reason := missing_reason("firestore", "pubsub")):
        pytest.skip(f"the official emulators are needed for this backend: {reason}")
    root = tmp_path_factory.mktemp("lanes")
    queues = Path(root) / "lanes.json"
    queues.write_text(json.dumps(LANES))
    with operator_stack(root, backend=request.param, GRADEQ_QUEUES_FILE=str(queues)) as local:
        yield local


def client_headers(stack: LocalStack) -> dict[str, str]:
    return {"Authorization": f"Bearer {stack.api_key}", "Idempotency-Key": str(uuid.uuid4())}


def operator(stack: LocalStack, path: str, **kwargs: Any) -> Any:
    url = stack.config.url("intake") + "/admin/v1/lanes" + path
    headers = {"Authorization": f"Bearer {OPERATOR_KEY}"}
    response = requests.post(url, headers=headers, timeout=30, **kwargs)
    assert response.status_code == 200, response.text
    return response.json()


def submit(stack: LocalStack, lane: str) -> tuple[str, dict[str, str]]:
    body = {"submission_id": f"s-{lane}", "answer": "ATP", "rubric": ["names ATP"], "lane": lane}
    headers = client_headers(stack)
    url = stack.config.url("intake") + "/v1/grading-jobs"
    response = requests.post(url, json=body, headers=headers, timeout=10)
    assert response.status_code == 202, response.text
    assert response.json()["lane"] == lane
    return response.json()["id"], headers


def status(stack: LocalStack, job_id: str, headers: dict[str, str]) -> dict[str, Any]:
    url = f"{stack.config.url('intake')}/v1/grading-jobs/{job_id}"
    job: dict[str, Any] = requests.get(url, headers=headers, timeout=10).json()
    return job


def wait_final(stack: LocalStack, job_id: str, headers: dict[str, str]) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        job = status(stack, job_id, headers)
        if job["status"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
            return job
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} not final: {job}")


def test_a_paused_lane_holds_its_job_while_another_lane_is_graded(stack: LocalStack) -> None:
    assert operator(stack, "/bulk/pause") == {"lane": "bulk", "paused": True}
    bulk, bulk_headers = submit(stack, "bulk")
    exam, exam_headers = submit(stack, "exam")
    assert wait_final(stack, exam, exam_headers)["status"] == "SUCCEEDED"
    time.sleep(1.5)  # well past the lane's next dispatch, were it not paused
    assert status(stack, bulk, bulk_headers)["status"] == "PENDING"
    assert operator(stack, "/bulk/resume") == {"lane": "bulk", "paused": False}
    done = wait_final(stack, bulk, bulk_headers)
    assert done["status"] == "SUCCEEDED" and done["lane"] == "bulk"


def test_a_purge_cancels_the_paused_lanes_jobs_with_a_reason(stack: LocalStack) -> None:
    operator(stack, "/bulk/pause")
    jobs = [submit(stack, "bulk") for _ in range(3)]
    report = operator(stack, "/bulk/purge", json={"reason": "wrong rubric"})
    assert sorted(report["cancelled"]) == sorted(job_id for job_id, _ in jobs)
    operator(stack, "/bulk/resume")
    for job_id, headers in jobs:
        job = wait_final(stack, job_id, headers)
        assert job["status"] == "CANCELLED"
        assert job["error"]["type"] == "lane-purged"
        assert "wrong rubric" in job["error"]["message"]
