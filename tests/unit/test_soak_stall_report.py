"""A soak that stalls says where: the client that gave up, the open job's record, the
processes down, what the recovery sweeps answered, and the job's last log lines."""

from __future__ import annotations

import io
import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import requests
import requests_mock

from localcloud.soak import Soak
from localcloud.stack import LocalStack, StackConfig


class _Answer:
    def __init__(self, document: dict[str, Any]) -> None:
        self._document = document

    def json(self) -> dict[str, Any]:
        return self._document


class _Exited:
    """A process that has died (what `poll()` says of a killed one)."""

    returncode = -9

    def poll(self) -> int:
        return self.returncode


class _Running:
    returncode = None

    def poll(self) -> None:
        return None


def _stack(tmp_path: Path) -> LocalStack:
    return LocalStack(StackConfig.on_free_ports(tmp_path / "data"), output=io.StringIO())


def _soak(stack: LocalStack) -> Soak:
    return Soak(seed=1, jobs=0, duration_s=0.0, fault_every_s=1.0, settle_s=0.4, stack=stack)


def test_a_client_that_never_sees_its_job_final_is_a_violation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    soak = _soak(_stack(tmp_path))
    monkeypatch.setattr(soak, "_call", lambda *a, **k: _Answer({"status": "RUNNING"}))
    soak._follow("job-open")
    assert len(soak.violations) == 1
    assert re.fullmatch(
        r"job-open: its client gave up after \d+ s, last shown RUNNING", soak.violations[0]
    )
    assert "job-open" not in soak.seen_final


def test_a_client_that_sees_its_job_final_leaves_no_violation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    soak = _soak(_stack(tmp_path))
    answers = iter([{"status": "RUNNING"}, {"status": "SUCCEEDED", "id": "job-done"}])
    monkeypatch.setattr(soak, "_call", lambda *a, **k: _Answer(next(answers)))
    soak._follow("job-done")
    assert soak.violations == []
    assert soak.seen_final["job-done"]["status"] == "SUCCEEDED"


def test_an_open_job_is_reported_with_its_record_the_dead_processes_sweeps_and_lines(
    tmp_path: Path,
) -> None:
    stack = _stack(tmp_path)
    stack.processes = {
        "worker": _Exited(),  # type: ignore[dict-item]
        "intake": _Running(),  # type: ignore[dict-item]
    }
    line = {"job_id": "job-open", "severity": "INFO", "message": "job gathered"}
    stack._lines["worker"] = [
        json.dumps({"job_id": "other", "severity": "INFO", "message": "not this job"}),
        json.dumps(line),
    ]
    stack._lines["intake"] = [json.dumps({**line, "message": "job accepted"})]
    stack._tally("500")
    stack._tally("500")
    job = {
        "status": "RUNNING",
        "attempts": 1,
        "generation": 0,
        "lane": "bulk",
        "provider_batch": {"provider": "openai-compatible", "batch_id": "batch_000001"},
    }
    trace = _soak(stack)._stall_trace("job-open", job)
    assert "'attempts': 1" in trace and "'lane': 'bulk'" in trace
    assert "'batch_id': 'batch_000001'" in trace
    assert "down: ['worker']" in trace
    assert "sweeps: {'500': 2}" in trace
    assert "intake: INFO job accepted" in trace and "worker: INFO job gathered" in trace
    assert "not this job" not in trace


def test_the_recovery_ticker_tallies_what_each_sweep_answered_and_fires_on(tmp_path: Path) -> None:
    config = StackConfig.on_free_ports(tmp_path / "data", recover_every_s=0.01)
    stack = LocalStack(config, output=io.StringIO())
    url = config.url("worker") + "/tasks/recover"
    with requests_mock.Mocker() as mock:
        mock.post(
            url,
            [
                {"status_code": 200},
                {"status_code": 500},
                {"exc": requests.ConnectionError},
                {"exc": ValueError("not a request error")},
                {"status_code": 200},
            ],
        )
        ticker = threading.Thread(target=stack._recover_loop)
        ticker.start()
        deadline = time.monotonic() + 10
        while sum(stack.sweeps().values()) < 5 and time.monotonic() < deadline:
            time.sleep(0.01)
        stack._stop.set()
        ticker.join(timeout=5)
    assert stack.sweeps().get("500") == 1
    assert stack.sweeps().get("ConnectionError") == 1
    # An error no request raises does not stop the ticker (Cloud Scheduler fires on).
    assert stack.sweeps().get("ValueError") == 1
    assert stack.lines("scheduler") == ["recovery call failed: ValueError('not a request error')\n"]
    assert stack.sweeps().get("200", 0) >= 2  # requests_mock repeats the last answer
