"""What a contract test needs from a TaskQueue setup: the queue, and what its target received.

A harness points its queue (embedded dispatcher or Cloud Tasks API server) at a
`RecordingTarget` (tests.support.http_target), a real HTTP server on loopback.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

from localcloud.tasks.dispatcher import Dispatcher
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.config.queues import QueueConfig, RateLimits, RetryConfig
from shared.ports import TaskQueue
from tests.support.http_target import ReceivedRequest, RecordingTarget


class TaskQueueHarness(Protocol):
    """A TaskQueue wired to a recording target."""

    @property
    def queue(self) -> TaskQueue: ...

    def wait_for_deliveries(self, n: int, timeout: float) -> list[ReceivedRequest]:
        """Wait until the target received at least `n` requests; return them."""
        ...


@dataclass(frozen=True)
class TargetHarness:
    """A harness whose deliveries are what a `RecordingTarget` received."""

    queue: TaskQueue
    target: RecordingTarget

    def wait_for_deliveries(self, n: int, timeout: float) -> list[ReceivedRequest]:
        return self.target.wait_for(n, timeout)


def fast_queue(
    name: str = "grading",
    *,
    deadline_s: float = 5.0,
    rate: float = 500.0,
    concurrency: int = 100,
    max_attempts: int = 5,
    max_retry_duration_s: float = 0.0,
    min_backoff_s: float = 0.1,
    max_backoff_s: float = 1.0,
    max_doublings: int = 2,
) -> QueueConfig:
    """A queue config with test-sized durations."""
    return QueueConfig(
        name=name,
        target_path="/tasks/grade",
        dispatch_deadline=timedelta(seconds=deadline_s),
        rate_limits=RateLimits(rate, concurrency),
        retry_config=RetryConfig(
            max_attempts=max_attempts,
            max_retry_duration=timedelta(seconds=max_retry_duration_s),
            min_backoff=timedelta(seconds=min_backoff_s),
            max_backoff=timedelta(seconds=max_backoff_s),
            max_doublings=max_doublings,
        ),
    )


@contextmanager
def running_dispatcher(
    db: SqliteDatabase, *queues: QueueConfig, grace_s: float = 0.5, **kwargs: Any
) -> Iterator[Dispatcher]:
    """Run an in-process dispatcher (no gRPC unless `grpc_address` is given) for the block."""
    kwargs.setdefault("grpc_address", None)
    kwargs.setdefault("poll_interval_s", 0.02)
    dispatcher = Dispatcher(db, {q.name: q for q in queues}, **kwargs)
    dispatcher.start()
    try:
        yield dispatcher
    finally:
        dispatcher.stop(grace_s=grace_s)


def eventually(check: Callable[[], bool], timeout: float = 3.0) -> None:
    """Wait until `check()` holds (an outcome is recorded just after the target answers)."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)
