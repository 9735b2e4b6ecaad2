"""A stopping worker answers the queue for a grading it hands back, however long its grader.

The stack's worker runs under gunicorn with a graceful timeout of 8 s; its grader hangs
for 15 s. On SIGTERM the drain's grace runs out, the heartbeat hands the job back, and
the delivery must answer the local Cloud Tasks with a retryable 500 right then: a grader
still running past the graceful timeout must not turn the answer into a dropped
connection.
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from localcloud.stack import EMBEDDED, LocalStack, StackConfig
from tests.e2e.fast_stack import fast_env

pytestmark = pytest.mark.e2e

#: The worker's graceful timeout in the stack (`--graceful-timeout` in localcloud.stack).
GRACEFUL_TIMEOUT_S = 8.0
#: How long the grader hangs: well past the graceful timeout.
GRADER_HANGS_S = 15.0
DRAIN_GRACE_S = 0.5


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[LocalStack]:
    env = fast_env(
        tmp_path,
        GRADEQ_GRADER_TIMEOUT_S=str(GRADER_HANGS_S),
        GRADEQ_DRAIN_GRACE_S=str(DRAIN_GRACE_S),
    )
    config = StackConfig.on_free_ports(
        tmp_path / "data", backend=EMBEDDED, client_id="e2e", recover_every_s=0, env=env
    )
    with (tmp_path / "stack.log").open("w") as log:
        local = LocalStack(config, output=log)
        local.start()
        try:
            yield local
        finally:
            local.stop()


def records(stack: LocalStack, name: str) -> list[dict[str, Any]]:
    found = []
    for line in stack.lines(name):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            found.append(record)
    return found


def until(condition: Any, timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (found := condition()):
        assert time.monotonic() < deadline, what
        time.sleep(0.05)
    return found


def test_a_handed_back_delivery_is_answered_at_once_though_its_grader_hangs(
    stack: LocalStack,
) -> None:
    body = {
        "submission_id": f"sub-{uuid.uuid4().hex[:6]}",
        "answer": "The mitochondria produce ATP.",
        "rubric": ["mentions mitochondria"],
        # The first attempt's grader hangs (until the grader timeout); the next grades.
        "metadata": {"simulate": {"failure": "hang", "times": 1}},
    }
    headers = {"Authorization": f"Bearer {stack.api_key}", "Idempotency-Key": "e2e-drain"}
    intake = stack.config.url("intake")
    submitted = requests.post(intake + "/v1/grading-jobs", json=body, headers=headers, timeout=10)
    assert submitted.status_code == 202, submitted.text
    job_id = submitted.json()["id"]
    until(
        lambda: [
            r
            for r in records(stack, "worker")
            if r.get("job_id") == job_id and r.get("message") == "grading started"
        ],
        20,
        "grading never started",
    )

    worker = stack.processes["worker"]
    os.killpg(worker.pid, signal.SIGTERM)  # as Cloud Run does on scale-in or redeploy
    stopped_at = time.monotonic()
    # The first answer the queue recorded for the delivery (later retries may follow).
    answer, *_ = until(
        lambda: [
            r
            for r in records(stack, "dispatcher")
            if r.get("job_id") == job_id and " failed (" in r.get("message", "")
        ],
        GRADER_HANGS_S + 10,
        "the queue never heard of the delivery",
    )
    answered_s = time.monotonic() - stopped_at
    # A retryable answer, not a dropped connection, and before gunicorn's graceful timeout.
    assert answer["status"] == 500, answer
    assert answered_s < GRACEFUL_TIMEOUT_S, answered_s
    worker.wait(timeout=GRACEFUL_TIMEOUT_S + 5)

    stack.restart("worker")

    def final() -> dict[str, Any] | None:
        job: dict[str, Any] = requests.get(
            f"{intake}/v1/grading-jobs/{job_id}", headers=headers, timeout=10
        ).json()
        return job if job["status"] in ("SUCCEEDED", "FAILED") else None

    graded = until(final, 60, "the handed-back job never finished")
    assert graded["status"] == "SUCCEEDED" and graded["attempts"] == 2
    print(f"answered {answered_s:.2f}s after SIGTERM")  # the figure docs/reliability.md quotes
