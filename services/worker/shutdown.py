"""Graceful shutdown: on SIGTERM the worker drains instead of leaving leases to expire.

Cloud Run sends SIGTERM and kills the container about 10 s later; gunicorn sends its
worker process SIGTERM on shutdown and on a worker restart. Gunicorn's own handler stops
accepting connections and waits up to its graceful timeout for requests in flight; the
handler added here first tells the grading loop to drain: gradings that finish within the
grace period are stored as usual, the others have their job handed back (RETRYING) by the
heartbeat, and their delivery answers 500 right then, whatever its grader is doing, so
the queue delivers them again after its backoff, to another instance.

A grader call runs on a daemon thread beside its delivery's (`shared.service_layer.worker`):
gunicorn joins only its request threads when its worker process exits, and those have
answered by the end of the grace, so a grader call that never returns keeps no stopping
process alive.
"""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType

from shared.service_layer.worker import WorkerService

log = logging.getLogger(__name__)


def _gunicorn_worker_handler(handler: object) -> bool:
    try:
        from gunicorn.workers.base import Worker
    except ImportError:  # pragma: no cover - gunicorn ships with the services
        return False
    return isinstance(getattr(handler, "__self__", None), Worker)


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

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        worker.drain(grace_s)  # a second SIGTERM (gunicorn's master forwards one) adds none
        if callable(previous):
            previous(signum, frame)

    signal.signal(signal.SIGTERM, on_sigterm)
    # Logged at start-up: worded as the promise it is, not as a shutdown under way.
    log.info("on SIGTERM, gradings in flight get %.1f s to finish", grace_s)
    return True
