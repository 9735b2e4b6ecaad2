"""The session webhooks are sent with: guarded connections, a deadline per delivery, and
the extra certificate authorities the settings name.

urllib3's timeouts bound each read, not a request: an endpoint that answers a byte at a
time could hold a delivery (and a subscriber thread) for as long as it likes. Every
socket a delivery opens is registered with it, and when its deadline passes the sockets
are shut down, which ends any read or write in progress at once.
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import requests
from requests.utils import DEFAULT_CA_BUNDLE_PATH
from urllib3.connection import HTTPConnection
from urllib3.util.ssl_ import create_urllib3_context

from shared.http.callback_guard import CallbackGuard, GuardedAdapter


class Delivery:
    """The sockets one delivery opened, shut down together when its deadline passes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self.expired = False

    def opened(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            expired = self.expired
        if expired:
            _shut(sock)

    def expire(self) -> None:
        with self._lock:
            self.expired = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)


def _shut(sock: socket.socket) -> None:
    # The plain socket's shutdown, also under TLS: it wakes a read blocked in another
    # thread. It may be closed already.
    with suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


_current = threading.local()


@contextmanager
def deadline(seconds: float) -> Iterator[Delivery]:
    """Shut down every connection this thread opens in the block once `seconds` pass."""
    delivery = Delivery()
    timer = threading.Timer(seconds, delivery.expire)
    timer.daemon = True
    _current.delivery = delivery
    timer.start()
    try:
        yield delivery
    finally:
        timer.cancel()
        _current.delivery = None


class _Watched(HTTPConnection):
    """A connection whose socket is registered with the delivery that opened it."""

    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        delivery: Delivery | None = getattr(_current, "delivery", None)
        if delivery is not None:
            delivery.opened(sock)
        return sock


class CallbackAdapter(GuardedAdapter):
    """The guard's adapter, with watched connections and an optional TLS context."""

    def __init__(self, guard: CallbackGuard, ssl_context: ssl.SSLContext | None = None) -> None:
        self._ssl_context = ssl_context
        super().__init__(guard)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        if self._ssl_context is not None:
            kwargs["ssl_context"] = self._ssl_context
        super().init_poolmanager(*args, **kwargs)
        pools = self.poolmanager.pool_classes_by_scheme
        watched = {}
        for scheme, pool in pools.items():
            conn = type(f"Watched{pool.ConnectionCls.__name__}", (_Watched, pool.ConnectionCls), {})
            watched[scheme] = type(f"Watched{pool.__name__}", (pool,), {"ConnectionCls": conn})
        self.poolmanager.pool_classes_by_scheme = watched


def trust_context(extra_ca_bundle: Path | None) -> ssl.SSLContext | None:
    """The public roots plus the CAs of `extra_ca_bundle`; None (the default) without one."""
    if extra_ca_bundle is None:
        return None
    context = create_urllib3_context()
    context.load_verify_locations(cafile=DEFAULT_CA_BUNDLE_PATH)
    try:
        context.load_verify_locations(cafile=str(extra_ca_bundle))
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(
            f"GRADEQ_WEBHOOK_CA_BUNDLE {extra_ca_bundle} is not a readable PEM file of CAs"
        ) from exc
    return context


def callback_session(guard: CallbackGuard, extra_ca_bundle: Path | None = None) -> requests.Session:
    """A session that connects only to vetted addresses and ignores proxy variables."""
    session = requests.Session()
    # Neither a proxy nor REQUESTS_CA_BUNDLE from the environment: a proxy would resolve
    # names out of the guard's sight, and trust is what the settings say.
    session.trust_env = False
    adapter = CallbackAdapter(guard, trust_context(extra_ca_bundle))
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    return session
