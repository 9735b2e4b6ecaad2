"""The worker's start-up line about SIGTERM reads as a promise, not as a shutdown."""

from __future__ import annotations

import logging
import signal
from typing import cast

import pytest
from gunicorn.workers.base import Worker

from services.worker.shutdown import drain_on_sigterm
from shared.service_layer.worker import WorkerService


def test_the_start_up_line_says_what_sigterm_will_do(caplog: pytest.LogCaptureFixture) -> None:
    gunicorns = Worker.__new__(Worker)  # only its bound handler is looked at
    previous = signal.signal(signal.SIGTERM, gunicorns.handle_exit)
    try:
        with caplog.at_level(logging.INFO, logger="services.worker.shutdown"):
            assert drain_on_sigterm(cast(WorkerService, object()), 8.0) is True
    finally:
        signal.signal(signal.SIGTERM, previous)
    [line] = [r.getMessage() for r in caplog.records if r.name == "services.worker.shutdown"]
    assert line == "on SIGTERM, gradings in flight get 8.0 s to finish"
