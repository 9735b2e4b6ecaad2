"""Compare enqueue latency: the SQLite outbox write vs CreateTask over loopback gRPC.

    .venv/bin/python bench/bench_enqueue.py [--n 1000]

Both paths write to one temporary SQLite file. The dispatcher runs paused (it serves the
gRPC API but dispatches nothing), so only the enqueue itself is measured.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import grpc
from google.cloud import tasks_v2
from google.cloud.tasks_v2.services.cloud_tasks.transports import CloudTasksGrpcTransport

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from localcloud.tasks.dispatcher import Dispatcher
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.adapters.embedded.task_queue import SqliteTaskQueue
from shared.codecs.task_body import CONTENT_TYPE, encode_task_body
from shared.config.queues import load_queues
from shared.ports import TaskSpec

PARENT = "projects/bench/locations/local/queues/grading"
TARGET = "http://127.0.0.1:8081/tasks/grade"


def measure(n: int, call: Callable[[int], object]) -> list[float]:
    """Run call(0..n-1) sequentially after a warm-up; return each latency in ms."""
    for i in range(50):
        call(-1 - i)
    latencies = []
    for i in range(n):
        start = time.perf_counter()
        call(i)
        latencies.append((time.perf_counter() - start) * 1000)
    return latencies


def summary(label: str, latencies: list[float]) -> float:
    median = statistics.median(latencies)
    p95 = statistics.quantiles(latencies, n=20)[18]
    print(f"{label:<38} median {median:6.3f} ms   p95 {p95:6.3f} ms   ({len(latencies)} calls)")
    return median


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1000)
    n = parser.parse_args().n
    queues = load_queues()
    with tempfile.TemporaryDirectory() as tmp:
        db = SqliteDatabase(Path(tmp) / "bench.sqlite3")
        # The shared file is meant to run in WAL mode: make sure it does, so the figures
        # are those of the intended setup (a rollback journal syncs on every commit).
        mode = db.connection().execute("PRAGMA journal_mode=WAL").fetchone()[0]
        outbox = SqliteTaskQueue(db, queues["grading"], TARGET)
        dispatcher = Dispatcher(db, queues, grpc_address="127.0.0.1:0", paused=True)
        dispatcher.start()
        channel = grpc.insecure_channel(f"127.0.0.1:{dispatcher.grpc_port}")
        client = tasks_v2.CloudTasksClient(transport=CloudTasksGrpcTransport(channel=channel))

        def outbox_enqueue(i: int) -> object:
            return outbox.enqueue(TaskSpec(name=f"outbox-{i}", job_id=f"job-{i}"))

        def grpc_create(i: int) -> object:
            task = tasks_v2.Task(
                name=f"{PARENT}/tasks/grpc-{i}",
                http_request=tasks_v2.HttpRequest(
                    url=TARGET,
                    body=encode_task_body("j"),
                    headers={"Content-Type": CONTENT_TYPE},
                ),
            )
            return client.create_task(parent=PARENT, task=task)

        print(f"{n} sequential enqueues each; dispatcher paused; one SQLite file ({mode})")
        a = summary("(a) SqliteTaskQueue.enqueue", measure(n, outbox_enqueue))
        b = summary("(b) CloudTasksClient.create_task", measure(n, grpc_create))
        print(f"ratio (b)/(a) of medians: {b / a:.1f}x")
        channel.close()
        dispatcher.stop(grace_s=0)


if __name__ == "__main__":
    main()
