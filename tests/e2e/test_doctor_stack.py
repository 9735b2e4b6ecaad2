"""`gradeq doctor` against the running local stack: one job through the public API, from
readiness to its analytics record, and a failing check for a refused key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gradeq.cli.doctor import DOCTOR_FAILED
from localcloud.stack import EMBEDDED, LocalStack, StackConfig
from tests.e2e.fast_stack import fast_env

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    root = tmp_path_factory.mktemp("doctor")
    config = StackConfig.on_free_ports(
        root / "data", backend=EMBEDDED, client_id="doctor", recover_every_s=0, env=fast_env(root)
    )
    with (root / "stack.log").open("w") as log:
        local = LocalStack(config, output=log)
        local.start()
        try:
            yield local
        finally:
            local.stop()


def doctor(stack: LocalStack, api_key: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The installed `gradeq` entry point, its URL and key given on the command line only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRADEQ_")}
    command = [
        str(Path(sys.executable).with_name("gradeq")),
        "--api-key", api_key, "--config", "/nonexistent",
        "doctor", "--url", stack.config.url("intake"), "--timeout", "60", *args,
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)


def test_doctor_follows_one_job_to_its_recorded_event(stack: LocalStack) -> None:
    ran = doctor(stack, stack.api_key, "--analytics-url", stack.config.url("analytics"), "--json")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    report = json.loads(ran.stdout)
    assert report["ok"] is True and report["url"] == stack.config.url("intake")
    checks = report["checks"]
    assert [c["check"] for c in checks][:2] == ["intake ready", "submit"]
    assert all(c["status"] == "ok" for c in checks), checks
    final = next(c for c in checks if c["check"] == "final state")
    assert final["detail"].startswith("SUCCEEDED: 2/2") and final["attempts"] == 1
    assert final["total_ms"] is not None and final["processing_ms"] is not None
    event = checks[-1]
    assert event["check"] == "event recorded" and event["event_id"].startswith("e-")
    # Timings run forward: each check ended no earlier than the one before.
    assert [c["at_ms"] for c in checks] == sorted(c["at_ms"] for c in checks)
    job_id = next(c for c in checks if c["check"] == "submit")["job_id"]
    assert final["job_id"] == job_id


def test_doctor_fails_on_a_refused_key_and_says_why(stack: LocalStack) -> None:
    ran = doctor(stack, "gq_not-a-key")
    assert ran.returncode == DOCTOR_FAILED, ran.stdout + ran.stderr
    assert "intake ready" in ran.stdout and "submit" in ran.stdout
    assert "FAILED" in ran.stdout and "401" in ran.stdout
