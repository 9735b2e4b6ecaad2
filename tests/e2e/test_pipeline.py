"""The whole local stack as real processes, driven over HTTP as a client would."""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests

from localcloud.cloudrun import forwarded_authorization
from localcloud.emulators import missing_reason
from localcloud.stack import (
    EMBEDDED,
    GOOGLE_EMULATORS,
    PUSH_ACCOUNT,
    TASKS_ACCOUNT,
    LocalStack,
    StackConfig,
)
from shared.domain.errors import PROBLEM_BASE
from tests.e2e.fast_stack import FAST_QUEUE, LEASE_S, fast_env
from tests.support.id_tokens import google_claims, signed_id_token
from tests.support.tls import PrivateCa, make_private_ca, tls_receiver

pytestmark = pytest.mark.e2e

#: Time for the restarted worker to come up, which a second Cloud Run instance would not need.
RESTART_SLACK_S = 5.0


@pytest.fixture(scope="module")
def private_ca(tmp_path_factory: pytest.TempPathFactory) -> PrivateCa:
    return make_private_ca(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module", params=[EMBEDDED, GOOGLE_EMULATORS])
def stack(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    private_ca: PrivateCa,
) -> Iterator[LocalStack]:
    """The stack on the embedded backend, then on the Google adapters and emulators."""
    if request.param == GOOGLE_EMULATORS and (reason := missing_reason("firestore", "pubsub")):
        pytest.skip(f"the official emulators are needed for this backend: {reason}")
    root = tmp_path_factory.mktemp(request.param)
    config = StackConfig.on_free_ports(
        root / "data",
        backend=request.param,
        client_id="e2e",
        recover_every_s=0,
        # Webhooks go to a receiver on loopback whose private CA the stack trusts.
        env={**fast_env(root), "GRADEQ_WEBHOOK_CA_BUNDLE": str(private_ca.bundle)},
    )
    log = (root / "stack.log").open("w")
    local = LocalStack(config, output=log)
    local.start()
    yield local
    local.stop()
    log.close()


#: A stack's first requests on the emulators reach cold JVMs and fresh gRPC channels: on a
#: loaded two-core machine one has taken over 10 s. A hung service still fails the test.
REQUEST_TIMEOUT_S = 30


def api(stack: LocalStack) -> dict[str, str]:
    """The stack's development credential."""
    return {"Authorization": f"Bearer {stack.api_key}"}


def submit(stack: LocalStack, key: str | None, **changes: Any) -> requests.Response:
    body = {
        "submission_id": f"sub-{uuid.uuid4().hex[:6]}",
        "answer": "The mitochondria produce ATP through cellular respiration.",
        "rubric": ["mentions mitochondria", "names ATP", "explains glycolysis"],
        "max_score": 9,
        **changes,
    }
    headers = api(stack)
    if key is not None:
        headers["Idempotency-Key"] = key
    return requests.post(
        stack.config.url("intake") + "/v1/grading-jobs",
        json=body,
        headers=headers,
        timeout=REQUEST_TIMEOUT_S,
    )


def wait_final(stack: LocalStack, location: str, timeout_s: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job: dict[str, Any] = requests.get(
            stack.config.url("intake") + location, headers=api(stack), timeout=REQUEST_TIMEOUT_S
        ).json()
        if job["status"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
            return job
        time.sleep(0.2)
    raise AssertionError(f"{location} not final after {timeout_s}s: {job}")


def job_lines(stack: LocalStack, service: str, job_id: str, message: str) -> list[dict[str, Any]]:
    found = []
    for line in stack.lines(service):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("job_id") == job_id and record.get("message") == message:
            found.append(record)
    return found


def received_by_analytics(stack: LocalStack, job_id: str, timeout_s: float = 20) -> list[Any]:
    """The events analytics recorded for this job, once at least one arrived."""
    deadline = time.monotonic() + timeout_s
    events: list[Any] = []
    while time.monotonic() < deadline:
        response = requests.get(
            stack.config.url("analytics") + f"/v1/events/{job_id}", headers=api(stack), timeout=5
        )
        if response.ok:
            events = response.json()["events"]
            if events:
                return events
        time.sleep(0.2)
    return events


def test_analytics_records_each_event_once_where_its_subscription_delivers_it(
    stack: LocalStack,
) -> None:
    """Embedded: the bus writes the BigQuery subscription itself, nothing is pushed to
    analytics. On the emulators (no BigQuery subscriptions there) analytics gets a push."""
    job = wait_final(
        stack, submit(stack, f"e2e-analytics-{uuid.uuid4().hex[:6]}").headers["Location"]
    )
    assert job["status"] == "SUCCEEDED"
    assert len(received_by_analytics(stack, job["id"])) == 1
    pushed = job_lines(stack, "analytics", job["id"], "push answered")
    if stack.config.backend == EMBEDDED:
        assert pushed == []
        assert len(job_lines(stack, "bus", job["id"], "event recorded")) == 1
        assert "analytics=" not in " ".join(stack.command("bus"))
    else:
        assert 204 in [line["status"] for line in pushed]  # a redelivery may add one


def test_same_key_twice_is_one_job_and_no_key_is_400(stack: LocalStack) -> None:
    first = submit(stack, "e2e-same-key", submission_id="same")
    second = submit(stack, "e2e-same-key", submission_id="same")
    assert first.status_code == second.status_code == 202
    assert first.headers["Location"] == second.headers["Location"]
    job = wait_final(stack, first.headers["Location"])
    assert job["status"] == "SUCCEEDED"
    assert job["result"]["score"] == 6.0
    assert len(job_lines(stack, "worker", job["id"], "grading started")) == 1
    assert len(received_by_analytics(stack, job["id"])) == 1

    missing = submit(stack, None)
    assert missing.status_code == 400
    assert missing.headers["Content-Type"].startswith("application/problem+json")


def test_worker_killed_mid_grading_is_retried_to_one_success(stack: LocalStack) -> None:
    response = submit(stack, "e2e-kill", metadata={"simulate": {"latency_s": 5}})
    location = response.headers["Location"]
    job_id = response.json()["id"]
    deadline = time.monotonic() + 20
    while not job_lines(stack, "worker", job_id, "grading started"):
        assert time.monotonic() < deadline, "grading never started"
        time.sleep(0.1)
    stack.kill("worker")
    killed = time.monotonic()
    stack.restart("worker")
    while len(job_lines(stack, "worker", job_id, "grading started")) < 2:
        assert time.monotonic() < killed + 30, "the dead attempt was never taken over"
        time.sleep(0.05)
    rescued_s = time.monotonic() - killed
    job = wait_final(stack, location, timeout_s=60)
    assert job["status"] == "SUCCEEDED"
    assert job["attempts"] == 2
    # Taken over by the next delivery within a lease and one backoff (plus the restart).
    backoff = FAST_QUEUE["grading"]["retry_config"]["max_backoff"]
    assert rescued_s < LEASE_S + float(str(backoff).rstrip("s")) + RESTART_SLACK_S
    assert len(received_by_analytics(stack, job_id)) == 1
    time.sleep(1)  # let any duplicate delivery arrive before counting again
    assert len(received_by_analytics(stack, job_id)) == 1


def test_sigterm_hands_a_long_grading_back_instead_of_leaving_its_lease(
    stack: LocalStack,
) -> None:
    response = submit(stack, "e2e-sigterm", metadata={"simulate": {"latency_s": 6}})
    location = response.headers["Location"]
    job_id = response.json()["id"]
    deadline = time.monotonic() + 20
    while not job_lines(stack, "worker", job_id, "grading started"):
        assert time.monotonic() < deadline, "grading never started"
        time.sleep(0.1)
    worker = stack.processes["worker"]
    os.killpg(worker.pid, signal.SIGTERM)  # as Cloud Run does on scale-in or redeploy
    worker.wait(timeout=10)
    assert job_lines(stack, "worker", job_id, "worker shutting down; lease released")
    held = requests.get(
        stack.config.url("intake") + location, headers=api(stack), timeout=10
    ).json()
    assert held["status"] == "RETRYING" and held["error"]["type"] == "worker-shutdown"
    stack.restart("worker")
    job = wait_final(stack, location, timeout_s=60)
    assert job["status"] == "SUCCEEDED" and job["attempts"] == 2
    assert len(received_by_analytics(stack, job_id)) == 1


def test_permanent_failure_and_transient_recovery(stack: LocalStack) -> None:
    failing = submit(stack, "e2e-permanent", metadata={"simulate": {"failure": "permanent"}})
    flaky = submit(
        stack, "e2e-transient", metadata={"simulate": {"failure": "transient", "times": 2}}
    )
    failed = wait_final(stack, failing.headers["Location"])
    assert failed["status"] == "FAILED"
    assert failed["error"]["type"] == "grading-permanent"
    assert "result" not in failed
    recovered = wait_final(stack, flaky.headers["Location"])
    assert recovered["status"] == "SUCCEEDED"
    assert recovered["attempts"] == 3
    outcomes = [e["outcome"] for e in received_by_analytics(stack, failed["id"])]
    assert outcomes == ["failed"]


def test_concurrent_deliveries_of_one_task_grade_once(stack: LocalStack) -> None:
    response = submit(stack, "e2e-concurrent", metadata={"simulate": {"latency_s": 1}})
    job_id = response.json()["id"]
    worker = stack.config.url("worker") + "/tasks/grade"
    headers = {
        **stack.push_authorization("worker"),
        "X-CloudTasks-TaskName": "t-duplicate",
        "X-CloudTasks-TaskRetryCount": "0",
    }

    def deliver(_: int) -> int:
        return requests.post(
            worker, json={"job_id": job_id}, headers=headers, timeout=30
        ).status_code

    with ThreadPoolExecutor(max_workers=20) as pool:
        codes = list(pool.map(deliver, range(20)))
    # 409: another delivery holds the lease (the queue delivers again later). Never a 503:
    # the deliveries are decided one after the other, on both backends.
    assert set(codes) <= {200, 409}
    job = wait_final(stack, response.headers["Location"])
    assert job["status"] == "SUCCEEDED"
    assert job["attempts"] == 1
    assert len(job_lines(stack, "worker", job_id, "grading started")) == 1
    assert len(received_by_analytics(stack, job_id)) == 1


def test_every_log_line_is_json_with_severity(stack: LocalStack) -> None:
    for service in ("intake", "worker"):
        records = [json.loads(line) for line in stack.lines(service) if line.startswith("{")]
        assert records, f"no JSON log lines from {service}"
        assert all("severity" in r and "message" in r for r in records)


def wait_for_line(stack: LocalStack, service: str, job_id: str, message: str) -> None:
    deadline = time.monotonic() + 20
    while not job_lines(stack, service, job_id, message):
        assert time.monotonic() < deadline, f"{service} never logged {message!r} for {job_id}"
        time.sleep(0.2)


def test_push_auth_runs_as_behind_cloud_run_iam(stack: LocalStack, private_ca: PrivateCa) -> None:
    """Production push auth: claims of Cloud-Run-forwarded tokens, sent by every caller."""
    for service in ("worker", "notification", "analytics"):
        env = stack.environment(service)
        assert env["GRADEQ_PUSH_AUTH"] == "oidc"
        assert env["GRADEQ_PUSH_VERIFY_SIGNATURE"] == "false"
        assert env["GRADEQ_PUSH_AUDIENCE"] == stack.config.url(service)

    # With a callback URL, so notification's subscription admits the event.
    with tls_receiver(private_ca) as (hook_url, _):
        response = submit(stack, "e2e-behind-iam", callback_url=hook_url)
        job = wait_final(stack, response.headers["Location"])
        assert job["status"] == "SUCCEEDED"
        assert len(received_by_analytics(stack, job["id"])) == 1
        wait_for_line(stack, "notification", job["id"], "event notified")

    worker = stack.config.url("worker")
    refused = {
        "no token": {},
        "wrong audience": forwarded_authorization(stack.config.url("analytics"), TASKS_ACCOUNT),
        "account not allowed": forwarded_authorization(worker, PUSH_ACCOUNT),
        "still signed, so not through Cloud Run": {
            "Authorization": f"Bearer {signed_id_token(google_claims(worker, TASKS_ACCOUNT))}"
        },
        # Cloud Run validates X-Serverless-Authorization and passes Authorization unread.
        "hand-written token beside the validated one": {
            "X-Serverless-Authorization": forwarded_authorization(worker, PUSH_ACCOUNT)[
                "Authorization"
            ],
            **forwarded_authorization(worker, TASKS_ACCOUNT),
        },
    }
    for case, headers in refused.items():
        answer = requests.post(
            worker + "/tasks/grade", json={"job_id": job["id"]}, headers=headers, timeout=10
        )
        assert answer.status_code == 401, case
        assert answer.headers["Content-Type"].startswith("application/problem+json"), case
        assert answer.json()["type"] == PROBLEM_BASE + "unauthenticated", case
    for subscriber in ("notification", "analytics"):
        answer = requests.post(stack.config.url(subscriber) + "/pubsub/push", json={}, timeout=10)
        assert answer.status_code == 401
        assert answer.json()["type"] == PROBLEM_BASE + "unauthenticated"
