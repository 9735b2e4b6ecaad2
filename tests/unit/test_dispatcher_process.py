"""`python -m localcloud.tasks` runs, logs JSON, serves gRPC, and stops on SIGTERM."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import grpc
import pytest
from google.cloud import tasks_v2
from google.cloud.tasks_v2.services.cloud_tasks.transports import CloudTasksGrpcTransport

from tests.support.http_target import RecordingTarget

ROOT = Path(__file__).resolve().parents[2]
QUEUES = {
    "grading": {
        "target_path": "/tasks/grade",
        "dispatch_deadline": "5s",
        "rate_limits": {"max_dispatches_per_second": 50, "max_concurrent_dispatches": 5},
        "retry_config": {
            "max_attempts": 3,
            "max_retry_duration": "0s",
            "min_backoff": "0.1s",
            "max_backoff": "1s",
            "max_doublings": 2,
        },
    }
}


class LogReader:
    """Collect a process's JSON log lines on a thread."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.put(json.loads(line))

    def wait_for(self, message: str, timeout: float = 10) -> dict[str, Any]:
        while True:
            entry = self.lines.get(timeout=timeout)
            if entry["message"] == message:
                return entry


@pytest.fixture
def process(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], LogReader]]:
    queues_file = tmp_path / "queues.json"
    queues_file.write_text(json.dumps(QUEUES))
    env = {**os.environ, "GRADEQ_PUSH_TOKEN": "tok", "GRADEQ_DATA_DIR": str(tmp_path)}
    env["GRADEQ_LOG_LEVEL"] = "DEBUG"  # successful deliveries are logged at DEBUG
    args = [
        sys.executable,
        "-m",
        "localcloud.tasks",
        "--queues-file",
        str(queues_file),
        "--grpc-port",
        "0",
        "--grace-s",
        "1",
    ]
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    try:
        yield proc, LogReader(proc.stdout)  # type: ignore[arg-type]
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()  # type: ignore[union-attr]


def test_runs_as_a_process(process: tuple[subprocess.Popen[str], LogReader]) -> None:
    proc, logs = process
    started = logs.wait_for("dispatcher started")
    assert started["severity"] == "INFO"
    assert started["service"] == "dispatcher"
    channel = grpc.insecure_channel(f"127.0.0.1:{started['grpc_port']}")
    client = tasks_v2.CloudTasksClient(transport=CloudTasksGrpcTransport(channel=channel))
    with RecordingTarget() as target:
        client.create_task(
            parent="projects/p/locations/l/queues/grading",
            task=tasks_v2.Task(
                http_request=tasks_v2.HttpRequest(url=target.url + "/tasks/grade", body=b"{}")
            ),
        )
        (request,) = target.wait_for(1, timeout=5)
        name = request.header("X-CloudTasks-TaskName")
        delivered = logs.wait_for(f"task {name} delivered")
    channel.close()
    assert request.header("Authorization") == "Bearer tok"
    assert delivered["job_id"] is None  # the body carried no job id
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0
    logs.wait_for("dispatcher stopped")
