"""Priority lanes under a bulk backlog: exam jobs' queue wait, and bulk throughput meanwhile.

    .venv/bin/python -m bench.lanes [--bulk 2000] [--exam 50] [--rate R] [--exam-every-s 0.1]

2,000 `bulk` jobs are queued, then 50 `exam` jobs arrive one every `--exam-every-s`. The
same load runs twice on the project's own task path (the SQLite outbox adapter the intake
enqueues through, and the local Cloud Tasks dispatcher with each queue's rate limit):

- lanes: bulk and exam jobs on their own queues (the shipped queues.json lanes, at their
  own rates, or each at `--rate` dispatches a second);
- single lane: every job on one queue at the same rate, exam jobs behind the backlog.

The worker is a loopback HTTP target that answers after `--latency-s` (the offline
grader's time), with no concurrency cap of its own. A job's queue wait is from its enqueue
to its first delivery. Bulk throughput is counted per second while the exam jobs run.
Prints a side-by-side table (and --json writes the figures).
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from localcloud.tasks.dispatcher import Dispatcher
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.adapters.embedded.task_queue import SqliteTaskQueue
from shared.codecs.task_body import decode_task_body
from shared.config.queues import QueueConfig, RateLimits, load_queues
from shared.ports import TaskSpec


@dataclass
class Worker:
    """A loopback target standing in for the worker: records each delivery, then answers."""

    latency_s: float
    delivered: dict[str, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def serve(self) -> ThreadingHTTPServer:
        worker = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                at = time.monotonic()
                job_id = decode_task_body(body)
                with worker.lock:
                    worker.delivered.setdefault(job_id, at)
                time.sleep(worker.latency_s)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(p / 100 * len(ordered))) - 1]


def _rated(queue: QueueConfig, rate: float) -> QueueConfig:
    return QueueConfig(
        name=queue.name,
        target_path=queue.target_path,
        dispatch_deadline=queue.dispatch_deadline,
        rate_limits=RateLimits(rate, 1000),
        retry_config=queue.retry_config,
        lane=queue.lane,
    )


def lane_rate(args: argparse.Namespace) -> float:
    """`--rate`, or the shipped exam lane's rate (the bulk lane is given the same)."""
    rate: float = args.rate or load_queues()["exam"].rate_limits.max_dispatches_per_second
    return rate


def run(args: argparse.Namespace, *, lanes: bool, directory: Path) -> dict[str, Any]:
    """One run; returns the exam jobs' waits and bulk's throughput while they ran."""
    shipped = load_queues()
    queues = {name: _rated(shipped[name], lane_rate(args)) for name in ("exam", "bulk")}
    exam_lane = "exam" if lanes else "bulk"
    db = SqliteDatabase(directory / ("lanes.sqlite3" if lanes else "single.sqlite3"))
    worker = Worker(args.latency_s)
    server = worker.serve()
    url = f"http://127.0.0.1:{server.server_port}/tasks/grade"
    outbox = SqliteTaskQueue(db, queues["bulk"], url, lanes=queues)
    enqueued: dict[str, float] = {}
    dispatcher = Dispatcher(
        db, queues, grpc_address=None, poll_interval_s=0.05, name_reservation=timedelta(0)
    )
    dispatcher.start()
    try:
        # The backlog is written before the exam starts (one transaction, as a bulk import).
        with db.transaction() as conn:
            for i in range(args.bulk):
                job_id = f"bulk-{i}"
                outbox.enqueue_in(conn, TaskSpec(f"t-{job_id}", job_id, queue="bulk"))
                enqueued[job_id] = time.monotonic()
        time.sleep(args.warmup_s)  # bulk is being worked through when the exam starts
        exam_start = time.monotonic()
        for i in range(args.exam):
            job_id = f"exam-{i}"
            enqueued[job_id] = time.monotonic()
            outbox.enqueue(TaskSpec(f"t-{job_id}", job_id, queue=exam_lane))
            time.sleep(args.exam_every_s)
        deadline = time.monotonic() + args.timeout_s
        exams = [f"exam-{i}" for i in range(args.exam)]
        while time.monotonic() < deadline:
            with worker.lock:
                if all(e in worker.delivered for e in exams):
                    break
            time.sleep(0.05)
        with worker.lock:
            delivered = dict(worker.delivered)
    finally:
        dispatcher.stop(grace_s=2.0)
        server.shutdown()
        server.server_close()
    waits = [delivered[e] - enqueued[e] for e in exams if e in delivered]
    exam_end = max((delivered[e] for e in exams if e in delivered), default=exam_start)
    # Bulk's throughput counts while the exam runs and bulk still has a backlog.
    bulk_end = max(at for job_id, at in delivered.items() if job_id.startswith("bulk-"))
    seconds = max(1, math.floor(min(exam_end, bulk_end) - exam_start))
    per_second = [0] * seconds
    for job_id, at in delivered.items():
        if job_id.startswith("bulk-") and exam_start <= at < exam_start + seconds:
            per_second[int(at - exam_start)] += 1
    return {
        "layout": "lanes" if lanes else "single lane",
        "exam_delivered": len(waits),
        "exam_wait_p50_ms": round(percentile(waits, 50) * 1000, 1) if waits else None,
        "exam_wait_p99_ms": round(percentile(waits, 99) * 1000, 1) if waits else None,
        "exam_window_s": round(exam_end - exam_start, 2),
        "bulk_per_s_mean": round(sum(per_second) / seconds, 1),
        "bulk_per_s_min": min(per_second),
    }


def table(rows: list[dict[str, Any]], rate: float) -> str:
    interval_ms = 1000 / rate
    lines = [
        f"exam vs bulk, each queue at {rate:g} dispatches/s (dispatch interval "
        f"{interval_ms:.0f} ms; target: exam p99 <= {2 * interval_ms:.0f} ms, bulk never 0/s)",
        f"{'layout':<12} {'exam p50':>10} {'exam p99':>10} {'exam done':>10} "
        f"{'bulk/s mean':>12} {'bulk/s min':>11}",
    ]
    for r in rows:
        lines.append(
            f"{r['layout']:<12} {r['exam_wait_p50_ms']:>8} ms {r['exam_wait_p99_ms']:>8} ms "
            f"{r['exam_delivered']:>10} {r['bulk_per_s_mean']:>12} {r['bulk_per_s_min']:>11}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bulk", type=int, default=2000)
    parser.add_argument("--exam", type=int, default=50)
    parser.add_argument("--rate", type=float, default=None, help="default: the exam lane's")
    parser.add_argument("--exam-every-s", type=float, default=0.1)
    parser.add_argument("--latency-s", type=float, default=0.05)
    parser.add_argument("--warmup-s", type=float, default=2.0)
    parser.add_argument("--timeout-s", type=float, default=300.0)
    parser.add_argument("--json", type=Path, help="Also write the figures here.")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="gradeq-bench-lanes-") as tmp:
        for lanes in (True, False):
            rows.append(run(args, lanes=lanes, directory=Path(tmp)))
    print(table(rows, lane_rate(args)))
    if args.json:
        args.json.write_text(json.dumps({"args": vars(args) | {"json": None}, "runs": rows}))


if __name__ == "__main__":
    main()
