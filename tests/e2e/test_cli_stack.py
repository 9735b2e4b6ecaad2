"""The installed `gradeq` command (and `python -m gradeq.cli`) against the running local
stack: submit, watch to completion, list the failed job, replay it and watch it succeed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localcloud.emulators import missing_reason
from localcloud.stack import EMBEDDED, GOOGLE_EMULATORS, LocalStack
from tests.e2e.operator_stack import OPERATOR_KEY, operator_stack

pytestmark = pytest.mark.e2e

REQUEST: dict[str, Any] = {
    "submission_id": "sub-cli",
    "answer": "The mitochondria produce ATP through cellular respiration.",
    "rubric": ["mentions mitochondria", "names ATP"],
    "max_score": 10,
}


@pytest.fixture(scope="module", params=[EMBEDDED, GOOGLE_EMULATORS])
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalStack]:
    """The stack on the embedded backend, then on Firestore and Pub/Sub emulators."""
    if request.param == GOOGLE_EMULATORS and (reason := missing_reason("firestore", "pubsub")):
        pytest.skip(f"the official emulators are needed for this backend: {reason}")
    with operator_stack(tmp_path_factory.mktemp("cli"), backend=request.param) as local:
        yield local


def gradeq(
    stack: LocalStack, *args: str, stdin: str | None = None, module: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run the `gradeq` entry point installed with the package (`module`: through
    `python -m gradeq.cli`)."""
    env = {
        **os.environ,
        "GRADEQ_URL": stack.config.url("intake"),
        "GRADEQ_API_KEY": stack.api_key,
        "GRADEQ_OPERATOR_KEY": OPERATOR_KEY,
        "GRADEQ_CONFIG": "/nonexistent",
    }
    program = (
        [sys.executable, "-m", "gradeq.cli"]
        if module
        else [str(Path(sys.executable).with_name("gradeq"))]
    )
    command = [*program, *args]
    return subprocess.run(
        command, input=stdin, capture_output=True, text=True, env=env, timeout=90, check=False
    )


def submit(stack: LocalStack, body: dict[str, Any]) -> str:
    result = gradeq(stack, "submit", "-", "--json", stdin=json.dumps(body))
    assert result.returncode == 0, result.stderr
    job_id: str = json.loads(result.stdout)["job"]["id"]
    return job_id


def test_submit_and_watch_to_completion(stack: LocalStack) -> None:
    job_id = submit(stack, REQUEST)
    watched = gradeq(stack, "status", job_id, "--watch", "--timeout", "60", "--json")
    assert watched.returncode == 0, watched.stderr
    job = json.loads(watched.stdout)
    assert job["status"] == "SUCCEEDED"
    assert job["result"]["score"] == 10
    assert job["timings"]["queue_wait_ms"] is not None
    # The worker's completion line, the source of the log-based timing metrics.
    lines = [json.loads(line) for line in stack.lines("worker") if job_id in line]
    [completed] = [line for line in lines if line.get("event") == "job_completed"]
    assert completed["severity"] == "INFO"
    assert completed["outcome"] == "succeeded"
    assert completed["job_id"] == job_id
    assert completed["total_ms"] == job["timings"]["total_ms"]
    assert completed["queue_wait_ms"] == job["timings"]["queue_wait_ms"]


def test_a_failed_job_is_listed_replayed_and_then_succeeds(stack: LocalStack) -> None:
    failing = {**REQUEST, "submission_id": "sub-dead", "metadata": {
        "simulate": {"failure": "permanent", "times": 1}
    }}  # fmt: skip
    job_id = submit(stack, failing)
    watched = gradeq(stack, "status", job_id, "--watch", "--timeout", "60")
    assert watched.returncode == 3, watched.stdout + watched.stderr
    assert "grading-permanent" in watched.stderr

    dead = json.loads(gradeq(stack, "failed", "--json").stdout)
    row = next(j for j in dead["jobs"] if j["id"] == job_id)
    assert row["last_error"]["type"] == "grading-permanent"
    assert [a["outcome"] for a in row["history"]] == ["failed"]

    replayed = gradeq(stack, "replay", job_id, "--json")
    assert replayed.returncode == 0, replayed.stderr
    assert json.loads(replayed.stdout)["replayed"] is True
    again = json.loads(gradeq(stack, "replay", job_id, "--json").stdout)
    assert again["replayed"] is False and again["job"]["generation"] == 1

    done = gradeq(stack, "status", job_id, "--watch", "--timeout", "60", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "SUCCEEDED"
    detail = json.loads(gradeq(stack, "list", "--json").stdout)
    assert job_id in [j["id"] for j in detail["jobs"]]
    stats = json.loads(gradeq(stack, "stats", "--json", module=True).stdout)
    assert stats["counts"]["SUCCEEDED"] >= 2
    assert stats["timings_ms"]["queue_wait_ms"]["p50"] is not None
