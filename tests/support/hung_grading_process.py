"""A worker process as gunicorn runs it, with one grading whose grader never returns.

    python -m tests.support.hung_grading_process DATABASE JOB_ID

The delivery runs on a non-daemon thread, as on gunicorn's request pool; SIGTERM goes
to a gunicorn worker's own handler with the worker's drain chained before it
(`services.worker.shutdown`). Once the handler stopped the worker, the main thread
returns, and the interpreter then waits for the delivery's thread, as a gunicorn worker
process exiting does. Prints "grading" once the grader was called, and "answered
<verdict>" once the delivery has its answer.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from pathlib import Path

from gunicorn.config import Config
from gunicorn.workers.base import Worker

from services.worker.shutdown import drain_on_sigterm
from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.clock import SystemClock
from shared.config.settings import Settings
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest
from shared.service_layer.worker import TaskDelivery, WorkerService

#: Gunicorn's graceful timeout in this process (seconds).
GRACEFUL_TIMEOUT_S = 1
#: The drain grace of this process (seconds).
DRAIN_GRACE_S = 0.2


class HangingGrader:
    name = "hanging"

    def grade(self, request: GradingRequest, *, attempt: int, timeout_s: float) -> GradeResult:
        print("grading", flush=True)
        threading.Event().wait()  # never returns
        raise AssertionError("unreachable")


def main(database: Path, job_id: str) -> None:
    budget = Settings().budget()
    store = SqliteJobStore(SqliteDatabase(database))
    service = WorkerService(
        store,
        _NoEvents(),
        HangingGrader(),
        SystemClock(),
        budget.queue.retry_config,
        budget,
    )
    cfg = Config()
    cfg.set("graceful_timeout", GRACEFUL_TIMEOUT_S)
    gunicorn_worker = Worker(0, 0, [], None, 30, cfg, None)
    signal.signal(signal.SIGTERM, gunicorn_worker.handle_exit)
    assert drain_on_sigterm(service, DRAIN_GRACE_S)

    def deliver() -> None:
        result = service.handle(TaskDelivery(job_id, "t", 0))
        print(f"answered {result.verdict}", flush=True)

    threading.Thread(target=deliver).start()
    while gunicorn_worker.alive:
        time.sleep(0.02)
    sys.exit(0)


class _NoEvents:
    def publish(self, event: object) -> str:
        raise AssertionError("a hung grading publishes nothing")

    def ping(self) -> None:
        return None


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
