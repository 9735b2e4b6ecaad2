"""A recording HTTP server on loopback: where tests point task queues and push subscriptions.

`RecordingTarget` records every request it gets and answers what its responder says. The
embedded dispatcher, Cloud Tasks on the local dispatcher, the embedded bus and the Pub/Sub
emulator all deliver to its `url`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.loopback import LoopbackServer


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
    """What the target answers: status, extra headers, how long it takes first, a body."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    body: bytes = b""


Responder = Callable[[ReceivedRequest], Reply]


def replies(*answers: Reply | int) -> Responder:
    """Answer with each of `answers` in turn, then keep answering the last one.

    A bare status stands for `Reply(status)`; `replies(500)` always answers 500.
    """
    if not answers:
        raise ValueError("replies() needs at least one answer")
    sequence = [a if isinstance(a, Reply) else Reply(a) for a in answers]
    pending = iter(sequence)
    return lambda _request: next(pending, sequence[-1])


class RecordingTarget(LoopbackServer):
    """A threaded HTTP server on 127.0.0.1 that records requests and answers via `responder`.

    `responder` may be replaced while the server runs, e.g. `target.responder = replies(500)`.
    """

    def __init__(self, responder: Responder | None = None) -> None:
        self.responder: Responder = responder or (lambda _request: Reply())
        self.requests: list[ReceivedRequest] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._cond = threading.Condition()
        super().__init__(self._handler_class())

    @property
    def url(self) -> str:
        return self.base_url

    def wait_for(self, n: int, timeout: float) -> list[ReceivedRequest]:
        """Wait until at least `n` requests arrived in total; return them all.

        Raises AssertionError on timeout.
        """
        with self._cond:
            if not self._cond.wait_for(lambda: len(self.requests) >= n, timeout):
                raise AssertionError(f"{len(self.requests)} of {n} requests within {timeout}s")
            return list(self.requests)

    def received_exactly(
        self, n: int, timeout: float, settle_s: float = 0.0
    ) -> list[ReceivedRequest]:
        """Wait for `n` requests, let `settle_s` pass, then assert that no more arrived.

        Returns the `n` requests; raises AssertionError on timeout or on any extra request.
        """
        self.wait_for(n, timeout)
        if settle_s:
            time.sleep(settle_s)
        with self._cond:
            got = list(self.requests)
        assert len(got) == n, f"expected exactly {n} requests, got {len(got)}"
        return got

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
                    self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                except OSError:
                    pass  # the sender gave up waiting (deadline): nobody to answer

            do_POST = do_PUT = do_GET = do_DELETE = do_PATCH = _handle  # noqa: N815

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler
