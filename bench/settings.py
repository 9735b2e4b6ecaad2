"""The workloads of `make bench` and the settings every system under test gets.

Pure data: the driver (bench.peers), the Gradeq launcher (bench.gradeq_stack) and the peer
apps read it, and a unit test checks it against the container's gunicorn settings.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

#: The systems, in the table's column order. "flask" only answers; it runs no job.
GRADEQ, CELERY, RQ, FLASK = "gradeq", "celery", "rq", "flask"
SYSTEMS = (GRADEQ, CELERY, RQ, FLASK)
LABELS = {GRADEQ: "Gradeq", CELERY: "Flask + Celery", RQ: "Flask + RQ", FLASK: "bare Flask"}

#: Where every producer (Gradeq's intake and each peer's Flask app) takes submissions.
SUBMIT_PATH = "/v1/grading-jobs"
#: The body every client POSTs (a valid Gradeq grading request).
JOB_BODY: dict[str, Any] = {
    "submission_id": "bench",
    "answer": "The mitochondria produce ATP through cellular respiration.",
    "rubric": ["mentions mitochondria", "names ATP"],
}

#: The intake's gunicorn settings in production (scripts/container-entrypoint.sh, with
#: THREADS = terraform's intake concurrency), given to every producer alike. The request
#: limits are shared.http.gunicorn_conf's, which Gradeq loads as its config module.
PRODUCER_THREADS = 80
GUNICORN_LIMITS = {
    "limit-request-line": 8190,
    "limit-request-fields": 100,
    "limit-request-field_size": 8190,
}


#: Threads of each process when the producers run one process per core.
PER_CORE_THREADS = 8


@dataclass(frozen=True)
class Front:
    """How every producer is served: gunicorn processes and threads in each."""

    workers: int
    threads: int

    @property
    def tag(self) -> str:
        """How the table's rows name this front, e.g. "1 x 80"."""
        return f"{self.workers} x {self.threads}"


#: Production: the container's one process with terraform's concurrency in threads.
PRODUCTION_FRONT = Front(1, PRODUCER_THREADS)


def per_core_front(cores: int | None = None) -> Front:
    """One process per core of this machine, PER_CORE_THREADS threads each."""
    return Front(cores or os.cpu_count() or 1, PER_CORE_THREADS)


def gunicorn_args(front: Front = PRODUCTION_FRONT) -> list[str]:
    """Process and thread settings of a producer, as the container starts the intake.

    The access log is left out for every system: the local stack pipes its processes'
    output through the supervisor, which would make the log cost more for Gradeq alone.
    """
    return [
        "--workers", str(front.workers), "--worker-class", "gthread",
        "--threads", str(front.threads),
        "--timeout", "0", "--graceful-timeout", "8", "--log-level", "warning",
    ]  # fmt: skip


def gunicorn_limit_args() -> list[str]:
    """The config module's request limits as command-line options (for the peers)."""
    return [f"--{name}={value}" for name, value in GUNICORN_LIMITS.items()]


@dataclass(frozen=True)
class Workload:
    """Sizes of every scenario; `quick()` shrinks them for a smoke run."""

    rounds: int = 3
    clients: int = 32
    #: wrk's duration per run: 8 s rather than 10 keeps the whole bench under 10 minutes.
    accept_s: float = 8.0
    burst_jobs: int = 1000
    burst_grade_s: float = 0.2
    concurrency: int = 50
    rate_jobs: int = 400
    rate_per_s: float = 20.0
    inflight_jobs: int = 1000
    inflight_grade_s: float = 30.0
    idle_jobs: int = 20
    #: How long subscribers may lag behind a burst before the run gives up waiting.
    subscriber_wait_s: float = 60.0

    @property
    def ideal_burst_s(self) -> float:
        """The burst's makespan with every slot busy all the time."""
        return self.burst_jobs * self.burst_grade_s / self.concurrency

    def quick(self) -> Workload:
        """A smoke-sized run: one round of each scenario in about two minutes."""
        return replace(
            self,
            rounds=1,
            accept_s=3.0,
            burst_jobs=200,
            rate_jobs=60,
            inflight_jobs=100,
            inflight_grade_s=10.0,
            idle_jobs=5,
            subscriber_wait_s=30.0,
        )
