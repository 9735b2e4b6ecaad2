"""What a contract test needs from a TaskQueue setup: the queue, and what its target received.

`RecordingTarget` is a real HTTP server on loopback that records every request; a harness
points its queue (embedded dispatcher or Cloud Tasks API server) at it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from services.dispatcher.dispatcher import Dispatcher
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.ports import TaskQueue
from shared.queue_config import QueueConfig, RateLimits, RetryConfig


@dataclass(frozen=True)
class ReceivedRequest:
    """One request the target received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    received_at: float = field(default_factory=time.monotonic)

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    def header(self, name: str) -> str | None:
        """Look a header up case-insensitively."""
        lowered = {k.lower(): v for k, v in self.headers.items()}
        return lowered.get(name.lower())


@dataclass(frozen=True)
class Reply:
    """What the target answers: status, extra headers, and how long it takes first."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


Responder = Callable[[ReceivedRequest], Reply]


class RecordingTarget:
    """A threaded HTTP server on 127.0.0.1 that records requests and answers via `responder`."""

    def __init__(self, responder: Responder | None = None) -> None:
        self.responder: Responder = responder or (lambda _request: Reply())
        self.requests: list[ReceivedRequest] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._cond = threading.Condition()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> RecordingTarget:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def wait_for(self, n: int, timeout: float) -> list[ReceivedRequest]:
        """Wait until at least `n` requests arrived; return them all (AssertionError on timeout)."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self.requests) >= n, timeout):
                raise AssertionError(f"{len(self.requests)} of {n} requests within {timeout}s")
            return list(self.requests)

    def _receive(self, request: ReceivedRequest) -> Reply:
        with self._cond:
            self.requests.append(request)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self._cond.notify_all()
        reply = self.responder(request)
        if reply.delay_s:
            time.sleep(reply.delay_s)
        with self._cond:
            self.in_flight -= 1
        return reply

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        target = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                received = ReceivedRequest(self.command, self.path, dict(self.headers), body)
                reply = target._receive(received)
                try:
                    self.send_response(reply.status)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                except OSError:
                    pass  # the dispatcher gave up waiting (deadline): nobody to answer

            do_POST = do_PUT = do_GET = do_DELETE = do_PATCH = _handle  # noqa: N815

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


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
