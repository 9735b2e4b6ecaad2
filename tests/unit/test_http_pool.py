"""The dispatcher's and the bus's HTTP client: kept-alive connections and failures told
apart. Its CPU per request against urllib3's is a benchmark: `make bench-http-pool`."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from localcloud.http_pool import NO_CONNECTION, TIMED_OUT, pool, send
from tests.support.loopback import LoopbackServer


class Target(LoopbackServer):
    """Answers 204 (or what `status` says), noting the client port of every request."""

    def __init__(self) -> None:
        self.ports: list[int] = []
        self.status = 204
        self.delay_s = 0.0
        self.close_after = False
        super().__init__(self._handler())

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        target = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                target.ports.append(self.client_address[1])
                time.sleep(target.delay_s)
                body = b"" if target.status == 204 else b"no"
                try:
                    self.send_response(target.status)
                    self.send_header("Retry-After", "7")
                    self.send_header("Content-Length", str(len(body)))
                    if target.close_after:
                        self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


@pytest.fixture
def target() -> Iterator[Target]:
    with Target() as server:
        yield server


def test_sequential_requests_reuse_one_connection(target: Target) -> None:
    http = pool(4)
    for _ in range(5):
        reply = send(http, "POST", target.base_url + "/push", b"{}", {}, 5.0)
        assert reply.status == 204
    assert len(target.ports) == 5
    assert len(set(target.ports)) == 1


def test_connections_send_without_delay(target: Target) -> None:
    http = pool(1)
    assert send(http, "POST", target.base_url + "/push", b"{}", {}, 5.0).status == 204
    [connection] = [c for kept in http._idle.values() for c in kept]
    assert connection.sock is not None
    assert connection.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)


def test_a_connection_the_server_closed_is_replaced(target: Target) -> None:
    http = pool(4)
    target.close_after = True
    assert send(http, "POST", target.base_url + "/a", b"{}", {}, 5.0).status == 204
    target.close_after = False
    assert send(http, "POST", target.base_url + "/b", b"{}", {}, 5.0).status == 204
    assert send(http, "POST", target.base_url + "/c", b"{}", {}, 5.0).status == 204
    first, second, third = target.ports
    assert first != second and second == third


def test_an_error_status_comes_back_with_its_body_and_headers(target: Target) -> None:
    target.status = 503
    reply = send(pool(1), "POST", target.base_url + "/x?y=1", b"{}", {}, 5.0)
    assert (reply.status, reply.body, reply.failure) == (503, b"no", "")
    assert reply.headers.get("retry-after") == reply.headers.get("Retry-After") == "7"


def test_a_slow_answer_is_a_timeout(target: Target) -> None:
    target.delay_s = 0.5
    reply = send(pool(1), "POST", target.base_url + "/slow", b"{}", {}, 0.1)
    assert (reply.status, reply.failure) == (None, TIMED_OUT)


def test_nothing_listening_is_unreachable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    reply = send(pool(1), "POST", f"http://127.0.0.1:{port}/x", b"{}", {}, 1.0)
    assert (reply.status, reply.failure) == (None, NO_CONNECTION)
    assert reply.detail.startswith("ConnectionError: cannot connect to 127.0.0.1")


def test_a_url_that_is_not_http_is_unreachable() -> None:
    reply = send(pool(1), "POST", "ftp://127.0.0.1/x", b"{}", {}, 1.0)
    assert (reply.status, reply.failure) == (None, NO_CONNECTION)
