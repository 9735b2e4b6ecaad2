"""Graceful shutdown: on SIGTERM the worker drains instead of leaving leases to expire.

Cloud Run sends SIGTERM and kills the container about 10 s later; gunicorn sends its
worker process SIGTERM on shutdown and on a worker restart. Gunicorn's own handler stops
accepting connections and waits up to its graceful timeout for requests in flight; the
handler added here first tells the grading loop to drain: gradings that finish within the
grace period are stored as usual, the others have their job handed back (RETRYING) by the
heartbeat and answer 500 once their grader returns, so the queue delivers them again
after its backoff, to another instance.

A grader runs on its request's thread, and gunicorn's request threads are joined when
its worker process exits: a grader call that never returns would keep a stopping process
alive. Its job was handed back when the grace ran out, so once gunicorn's graceful
timeout has passed too, the process ends itself (`stop_hung_gradings_after`).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from shared.service_layer.worker import WorkerService

log = logging.getLogger(__name__)

#: How long after gunicorn's graceful timeout a process kept alive by a grader ends.
HUNG_EXIT_MARGIN_S = 1.0
#: The exit status of a process that had to end with gradings still running.
HUNG_EXIT_STATUS = 1


def _gunicorn_worker_handler(handler: object) -> bool:
    try:
        from gunicorn.workers.base import Worker
    except ImportError:  # pragma: no cover - gunicorn ships with the services
        return False
    return isinstance(getattr(handler, "__self__", None), Worker)


def _graceful_timeout_s(handler: Any) -> float:
    """Gunicorn's graceful timeout, from the worker whose SIGTERM handler this is."""
    return float(handler.__self__.cfg.graceful_timeout)


def stop_hung_gradings_after(
    worker: WorkerService,
    after_s: float,
    exit: Callable[[int], object] = os._exit,
) -> threading.Thread:
    """End the process `after_s` from now if a grader call still has not returned.

    Runs on a daemon thread of its own, so a process whose gradings all ended exits on
    its own as usual, earlier.
    """

    def watch() -> None:
        time.sleep(after_s)
        hung = worker.gradings_in_flight
        if hung == 0:
            return
        log.error(
            "grader calls still running after the graceful timeout; ending the process",
            extra={"gradings": hung},
        )
        for handler in logging.getLogger().handlers:
            handler.flush()
        exit(HUNG_EXIT_STATUS)

    thread = threading.Thread(target=watch, name="hung-gradings", daemon=True)
    thread.start()
    return thread


def drain_on_sigterm(worker: WorkerService, grace_s: float) -> bool:
    """Chain a draining step before gunicorn's SIGTERM handler; False when not under gunicorn.

    Only a gunicorn worker process (its main thread, where the app is loaded) is changed:
    an app built by tests or tools keeps its process's signal handling.
    """
    if threading.current_thread() is not threading.main_thread():
        return False
    previous = signal.getsignal(signal.SIGTERM)
    if not _gunicorn_worker_handler(previous):
        return False
    stop_after = max(grace_s, _graceful_timeout_s(previous)) + HUNG_EXIT_MARGIN_S
    stopping: list[bool] = []

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        worker.drain(grace_s)
        if not stopping:  # a second SIGTERM (gunicorn's master forwards one) adds none
            stopping.append(True)
            stop_hung_gradings_after(worker, stop_after)
        if callable(previous):
            previous(signum, frame)

    signal.signal(signal.SIGTERM, on_sigterm)
    log.info("SIGTERM drains gradings in flight for %.1fs", grace_s)
    return True
