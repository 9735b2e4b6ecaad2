"""The stand-ins' HTTP client: kept-alive connections per target, shared by the threads.

The dispatcher and the bus send thousands of small requests to a few loopback targets.
Per request, `requests` costs more CPU than the request itself there, and so does
urllib3's pool manager (URL parsing, pool keys, retry and timeout objects): over
http.client's connections, reused here, a push costs about half the CPU of the same push
through urllib3 (tests/unit/test_http_pool.py measures both). Like Cloud Tasks and
Pub/Sub, the senders follow no redirect, retry nothing within an attempt and take no
proxy from the environment.
"""

from __future__ import annotations

import functools
import http.client
import select
import socket
import ssl
import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from urllib3 import HTTPHeaderDict

#: Why a request got no response.
TIMED_OUT = "timeout"
NO_CONNECTION = "unreachable"


@dataclass(frozen=True)
class Reply:
    """A response (status, headers, body), or why there was none (`status` None).

    `headers` is case-insensitive, as HTTP header names are.
    """

    status: int | None
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    failure: str = ""
    detail: str = ""


@dataclass(frozen=True)
class _Target:
    """Where a URL's requests go: a connection key and the request target."""

    scheme: str
    host: str
    port: int
    path: str


@functools.lru_cache(maxsize=256)
def _target(url: str) -> _Target:
    """Parse a URL once: the senders send to the same few URLs over and over."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url!r}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return _Target(parts.scheme, parts.hostname, port, path)


def _dropped(connection: http.client.HTTPConnection) -> bool:
    """Whether an idle connection was closed by its server (it is readable: EOF)."""
    sock = connection.sock
    if sock is None:
        return True
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


class Pool:
    """Idle connections per target, at most `size` of each kept for reuse."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._idle: dict[tuple[str, str, int], list[http.client.HTTPConnection]] = {}
        self._lock = threading.Lock()
        self._tls: ssl.SSLContext | None = None
        # A pool dropped without close() still closes what it holds.
        weakref.finalize(self, _close_all, self._idle)

    def _take(self, target: _Target, timeout_s: float) -> http.client.HTTPConnection:
        key = (target.scheme, target.host, target.port)
        while True:
            with self._lock:
                idle = self._idle.get(key)
                connection = idle.pop() if idle else None
            if connection is None:
                return self._connection(target, timeout_s)
            if not _dropped(connection):
                connection.timeout = timeout_s
                if connection.sock is not None:
                    connection.sock.settimeout(timeout_s)
                return connection
            connection.close()

    def _connection(self, target: _Target, timeout_s: float) -> http.client.HTTPConnection:
        if target.scheme == "https":
            if self._tls is None:
                self._tls = ssl.create_default_context()
            return http.client.HTTPSConnection(
                target.host, target.port, timeout=timeout_s, context=self._tls
            )
        return http.client.HTTPConnection(target.host, target.port, timeout=timeout_s)

    def _give_back(self, target: _Target, connection: http.client.HTTPConnection) -> None:
        key = (target.scheme, target.host, target.port)
        with self._lock:
            idle = self._idle.setdefault(key, [])
            if len(idle) < self._size:
                idle.append(connection)
                return
        connection.close()

    def close(self) -> None:
        """Close every idle connection (the pool stays usable)."""
        with self._lock:
            _close_all(self._idle)

    def send(
        self, method: str, url: str, body: bytes, headers: Mapping[str, str], timeout_s: float
    ) -> Reply:
        """One request with no retry and no redirect; the body is read (the connection reused)."""
        try:
            target = _target(url)
        except ValueError as exc:
            return Reply(None, failure=NO_CONNECTION, detail=str(exc))
        connection = self._take(target, timeout_s)
        connecting = connection.sock is None
        try:
            if connecting:
                connection.connect()
                # As urllib3 did: a small request is never held back waiting for an ACK.
                assert connection.sock is not None
                connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            connecting = False
            connection.request(method, target.path, body=body, headers=dict(headers))
            response = connection.getresponse()
            content = response.read()
        except TimeoutError as exc:
            connection.close()
            return Reply(None, failure=TIMED_OUT, detail=_describe(exc, target, connecting))
        except (OSError, http.client.HTTPException) as exc:
            connection.close()
            return Reply(None, failure=NO_CONNECTION, detail=_describe(exc, target, connecting))
        if response.will_close:
            connection.close()
        else:
            self._give_back(target, connection)
        return Reply(response.status, HTTPHeaderDict(response.getheaders()), content)


def _close_all(idle: dict[tuple[str, str, int], list[http.client.HTTPConnection]]) -> None:
    connections = [c for kept in idle.values() for c in kept]
    idle.clear()
    for connection in connections:
        connection.close()


def _describe(exc: BaseException, target: _Target, connecting: bool) -> str:
    if connecting:
        return f"ConnectionError: cannot connect to {target.host}:{target.port}: {exc!r}"
    return f"{type(exc).__name__}: {exc}"


def pool(size: int) -> Pool:
    """Up to `size` kept-alive connections per target, shared by the threads."""
    return Pool(size)


def send(
    http: Pool,
    method: str,
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    timeout_s: float,
) -> Reply:
    """One request through `http` with no retry and no redirect."""
    return http.send(method, url, body, headers, timeout_s)
