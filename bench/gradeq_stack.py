"""Start Gradeq's local stack (the embedded default) for the benchmark; stop it on EOF.

    .venv/bin/python -m bench.gradeq_stack --data-dir DIR [--grader-latency-s S]
        [--rate N] [--concurrency N] [--worker-threads N] [--only intake,...]
        [--front-workers N] [--front-threads N]

Runs from Gradeq's own venv, as `make run` does: `localcloud.stack.LocalStack` on free
loopback ports, with the offline grader taking a fixed time (failure simulation off),
the shipped grading queue with the given rate and concurrency, and admission limits
out of the way (one client submits everything). The intake runs with the container's
gunicorn settings (bench.settings) or the processes and threads given, the other
services as the stack starts them.

When every process answers, one JSON line on stdout tells the driver the intake's URL,
the API key, the database file and each process's pid. The stack stops when stdin
closes (or on SIGTERM); its processes' output goes to DIR/stack.log.
"""

from __future__ import annotations

import argparse
import json
import platform
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import IO, Any

from bench.settings import Front, gunicorn_args
from localcloud.ports import free_ports
from localcloud.stack import GUNICORN_CONFIG, HTTP_SERVICES, LocalStack, StackConfig
from shared.config.queues import DEFAULT_QUEUES_FILE

#: Large enough that admission never refuses a benchmark submission.
UNLIMITED = "100000000"


def queues_file(directory: Path, rate: float, concurrency: int) -> Path:
    """The shipped queues with the grading queue's rate limits replaced."""
    queues: dict[str, Any] = json.loads(DEFAULT_QUEUES_FILE.read_text())
    queues["grading"]["rate_limits"] = {
        "max_dispatches_per_second": rate,
        "max_concurrent_dispatches": concurrency,
    }
    path = directory / "queues.json"
    path.write_text(json.dumps(queues, indent=2))
    return path


def bench_env(directory: Path, args: argparse.Namespace) -> dict[str, str]:
    return {
        "GRADEQ_GRADER": "rubric",
        "GRADEQ_GRADER_LATENCY_S": str(args.grader_latency_s),
        "GRADEQ_GRADER_SIMULATE": "false",
        "GRADEQ_QUEUES_FILE": str(queues_file(directory, args.rate, args.concurrency)),
        # Every job comes from one client, submitted as fast as it can be.
        "GRADEQ_SUBMIT_BURST": UNLIMITED,
        "GRADEQ_SUBMIT_RATE_PER_S": UNLIMITED,
        "GRADEQ_MAX_ACTIVE_JOBS_PER_CLIENT": UNLIMITED,
        "GRADEQ_MAX_BACKLOG": UNLIMITED,
        # No spacing of one client's jobs: the queue's own limits are what is measured.
        "GRADEQ_FAIR_SPACING_S": "0",
    }


class BenchStack(LocalStack):
    """The local stack with the intake under production gunicorn settings; optionally a
    subset of its processes (the acceptance scenario runs the intake alone)."""

    def __init__(
        self, config: StackConfig, output: IO[str], only: tuple[str, ...], front: Front
    ) -> None:
        self._only = only
        self._front = front
        super().__init__(config, output)

    def process_names(self) -> tuple[str, ...]:
        names = super().process_names()
        return tuple(n for n in names if n in self._only) if self._only else names

    def command(self, name: str) -> list[str]:
        if name != "intake":
            return super().command(name)
        return [
            sys.executable, "-m", "gunicorn", "--config", GUNICORN_CONFIG,
            "--bind", f"127.0.0.1:{self.config.ports['intake']}", *gunicorn_args(self._front),
            "services.intake.app:create_app()",
        ]  # fmt: skip


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.gradeq_stack", description=__doc__)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--grader-latency-s", type=float, default=0.0)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--worker-threads", type=int, default=50)
    parser.add_argument("--front-workers", type=int, default=1, help="intake processes")
    parser.add_argument("--front-threads", type=int, default=80, help="threads of each")
    parser.add_argument("--only", default="", help="comma-separated processes to start")
    parser.add_argument("--stop-timeout-s", type=float, default=10.0)
    return parser.parse_args(argv)


def _stop_on_eof(stopped: threading.Event) -> None:
    sys.stdin.read()
    stopped.set()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    directory: Path = args.data_dir
    directory.mkdir(parents=True, exist_ok=True)
    names = (*HTTP_SERVICES, "dispatcher_grpc")
    ports = dict(zip(names, free_ports(len(names)), strict=True))
    config = StackConfig(
        data_dir=directory,
        ports=ports,
        worker_threads=args.worker_threads,
        env=bench_env(directory, args),
    )
    only = tuple(n for n in args.only.split(",") if n)
    stopped = threading.Event()

    def on_term(signum: int, frame: FrameType | None) -> None:
        stopped.set()

    signal.signal(signal.SIGTERM, on_term)
    with (directory / "stack.log").open("w") as log:
        front = Front(args.front_workers, args.front_threads)
        stack = BenchStack(config, log, only, front)
        stack.start()
        try:
            ready = {
                "intake_url": config.url("intake"),
                "api_key": stack.api_key,
                "database": str(directory / "gradeq.sqlite3"),
                "pids": {name: p.pid for name, p in stack.processes.items()},
                "python": platform.python_version(),
            }
            print(json.dumps(ready), flush=True)
            threading.Thread(target=_stop_on_eof, args=(stopped,), daemon=True).start()
            stopped.wait()
        finally:
            stack.stop(timeout_s=args.stop_timeout_s)


if __name__ == "__main__":
    main()
