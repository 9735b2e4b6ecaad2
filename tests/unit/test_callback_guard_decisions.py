"""The callback guard's decisions: what counts as one host, what the lookup cache keys on
and is asked, what the system resolver answers, and that the send-time session never
lets a connection go around the guard. The guard is called directly; the only traffic is
to a recording server on loopback."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from urllib3.connection import HTTPConnection
from urllib3.exceptions import NewConnectionError

from shared.http.callback_guard import (
    CachedResolver,
    CallbackGuard,
    CallbackRefused,
    GuardedAdapter,
    RefusedConnection,
    TooManyCallbackHosts,
    guarded_session,
    refused_by_guard,
    system_resolver,
)
from tests.support.http_target import RecordingTarget
from tests.unit.test_callback_dns import CountingResolver, Timer


class AskedResolver:
    """Answers every name with one address (a public one unless told), recording the host
    and port asked."""

    def __init__(self, address: str = "93.184.216.34") -> None:
        self.address = address
        self.asked: list[tuple[str, int]] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append((host, port))
        return [self.address]


# --- how many hosts a request names ---------------------------------------------------


def test_names_that_only_upper_case_alike_are_distinct_hosts() -> None:
    # "ß" upper-cases to "SS": the two are different names (IDNA 2008), so two hosts.
    guard = CallbackGuard(CountingResolver({}), max_hosts_per_request=1)
    with pytest.raises(TooManyCallbackHosts) as caught:
        guard.check_hosts(["https://straße.example/h", "https://strasse.example/h"])
    assert caught.value.detail == ("the request names 2 callback hosts, at most 1 are allowed")
    guard.check_hosts(["https://Strasse.example/h", "https://STRASSE.example/x"])


def test_a_url_without_a_host_counts_as_a_host_of_its_own() -> None:
    guard = CallbackGuard(CountingResolver({}), max_hosts_per_request=1)
    with pytest.raises(TooManyCallbackHosts) as caught:
        guard.check_hosts(["https:///h", "https://xxxx/h"])
    assert caught.value.extensions == {"limit": 1}
    guard.check_hosts(["https:///h", "mailto:someone"])  # both hostless: one "host"


# --- the lookup cache ----------------------------------------------------------------


def test_the_cache_tells_apart_names_that_only_upper_case_alike() -> None:
    dns = CountingResolver({"straße.example": ["93.184.216.34"], "strasse.example": ["1.1.1.1"]})
    cached = CachedResolver(dns, timer=Timer())
    assert cached("straße.example", 443) == ["93.184.216.34"]
    assert cached("strasse.example", 443) == ["1.1.1.1"]
    assert cached("STRASSE.example", 443) == ["1.1.1.1"]
    assert dns.asked == ["straße.example", "strasse.example"]


def test_the_lookup_is_asked_for_the_host_and_port_it_was_given() -> None:
    dns = AskedResolver()
    cached = CachedResolver(dns, timer=Timer())
    assert cached("Hooks.Example.com", 8443) == ["93.184.216.34"]
    assert dns.asked == [("Hooks.Example.com", 8443)]


def test_a_failed_lookup_is_remembered_as_its_error_type_and_message() -> None:
    cached = CachedResolver(CountingResolver({}), timer=Timer())
    for _ in range(2):
        with pytest.raises(OSError) as caught:
            cached("nowhere.example", 443)
        assert str(caught.value) == "OSError: no such host nowhere.example"


# --- the system resolver -------------------------------------------------------------


def test_the_system_resolver_answers_the_addresses_of_the_host() -> None:
    # Address literals: the operating system answers without asking any DNS server.
    assert system_resolver("192.0.2.7", 443) == ["192.0.2.7"]
    assert system_resolver("198.51.100.20", 8443) == ["198.51.100.20"]


# --- the send-time session -----------------------------------------------------------


@pytest.fixture
def target() -> Iterator[RecordingTarget]:
    with RecordingTarget() as recording:
        yield recording


def test_an_https_request_goes_through_the_guard(target: RecordingTarget) -> None:
    port = int(target.url.rsplit(":", 1)[1])
    guard = CallbackGuard(CountingResolver({}), allowed_ports=[port])
    session = guarded_session(guard)
    assert isinstance(session.get_adapter(f"https://127.0.0.1:{port}/"), GuardedAdapter)
    with pytest.raises(requests.ConnectionError) as caught:
        session.post(f"https://127.0.0.1:{port}/hook", data=b"x", timeout=5)
    refusal = refused_by_guard(caught.value)
    assert refusal is not None
    assert (
        refusal.detail == "the callback host 127.0.0.1 resolves to a loopback address (127.0.0.1)"
    )
    assert target.requests == []


def test_the_session_ignores_proxy_variables(
    target: RecordingTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A proxy would resolve the name itself: the request must still meet the guard.
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.setenv(name, target.url)
    guard = CallbackGuard(CountingResolver({"hooks.test": ["10.1.2.3"]}))
    session = guarded_session(guard)
    assert session.trust_env is False
    with pytest.raises(requests.ConnectionError) as caught:
        session.post("http://hooks.test/hook", data=b"x", timeout=5)
    refusal = refused_by_guard(caught.value)
    assert refusal is not None
    assert "private address (10.1.2.3)" in refusal.detail
    assert target.requests == []


def connection_class(guard: CallbackGuard) -> Any:
    """The guarded session's own class of plain-http connection."""
    return GuardedAdapter(guard).poolmanager.pool_classes_by_scheme["http"].ConnectionCls


def port_of(target: RecordingTarget) -> int:
    return int(target.url.rsplit(":", 1)[1])


def test_a_connection_vets_its_host_for_the_port_it_connects_to(target: RecordingTarget) -> None:
    dns = AskedResolver("127.0.0.1")
    conn: HTTPConnection = connection_class(CallbackGuard(dns, allow_loopback=True))(
        "hooks.test", port_of(target)
    )
    conn.connect()
    try:
        assert conn.sock is not None
        assert conn.sock.getpeername() == ("127.0.0.1", port_of(target))
        assert dns.asked == [("hooks.test", port_of(target))]
    finally:
        conn.close()


def test_a_connection_keeps_its_timeout_source_address_and_socket_options(
    target: RecordingTarget,
) -> None:
    # 127.0.0.2 is loopback too: binding to it shows the source address was used.
    guard = CallbackGuard(AskedResolver("127.0.0.1"), allow_loopback=True)
    keepalive = [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]
    conn: HTTPConnection = connection_class(guard)(
        "hooks.test",
        port_of(target),
        timeout=2.5,
        source_address=("127.0.0.2", 0),
        socket_options=keepalive,
    )
    conn.connect()
    try:
        sock = conn.sock
        assert sock is not None
        assert sock.gettimeout() == 2.5
        assert sock.getsockname()[0] == "127.0.0.2"
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
    finally:
        conn.close()


def test_a_refused_connection_names_the_connection_and_the_guard_s_reason(
    target: RecordingTarget,
) -> None:
    conn: HTTPConnection = connection_class(CallbackGuard(AskedResolver()))(
        "127.0.0.1", port_of(target)
    )
    with pytest.raises(RefusedConnection) as caught:
        conn.connect()
    reason = "the callback host 127.0.0.1 resolves to a loopback address (127.0.0.1)"
    assert caught.value.conn is conn
    assert str(caught.value) == f"{conn}: {reason}"
    assert target.requests == []


def _closed_loopback_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_an_allowed_address_that_refuses_names_the_connection_and_the_last_error() -> None:
    guard = CallbackGuard(AskedResolver("127.0.0.1"), allow_loopback=True)
    conn: HTTPConnection = connection_class(guard)("hooks.test", _closed_loopback_port())
    with pytest.raises(NewConnectionError) as caught:
        conn.connect()
    assert caught.value.conn is conn
    message = str(caught.value)
    assert message.startswith(f"{conn}: Failed to establish a new connection: [Errno ")
    assert message.endswith("Connection refused")


# --- finding the guard's refusal behind a requests error ------------------------------


class Failed(Exception):
    """An error of a transport layer, with the urllib3 `reason` when it has one."""

    def __init__(self, *args: object, reason: BaseException | None = None) -> None:
        super().__init__(*args)
        if reason is not None:
            self.reason = reason


def _caused_by(inner: BaseException, layers: int) -> BaseException:
    for n in range(layers):
        outer = Failed(f"layer {n}")
        outer.__cause__ = inner
        inner = outer
    return inner


def test_the_refusal_is_found_through_reason_argument_or_cause() -> None:
    refusal = CallbackRefused("the callback host h resolves to a private address (10.0.0.1)")
    assert refused_by_guard(refusal) is refusal
    assert refused_by_guard(Failed("pool", reason=refusal)) is refusal
    assert refused_by_guard(Failed(refusal)) is refusal
    assert refused_by_guard(_caused_by(refusal, 1)) is refusal
    # requests' ConnectionError holds urllib3's error, whose reason is the pinned one's.
    assert refused_by_guard(Failed(Failed("pool", reason=_caused_by(refusal, 1)))) is refusal


def test_the_refusal_is_looked_for_ten_errors_deep_and_no_deeper() -> None:
    refusal = CallbackRefused("refused")
    assert refused_by_guard(_caused_by(refusal, 9)) is refusal
    assert refused_by_guard(_caused_by(refusal, 10)) is None


def test_an_error_the_guard_did_not_cause_is_not_a_refusal() -> None:
    assert refused_by_guard(Failed("timed out")) is None
    assert refused_by_guard(Failed("pool", reason=OSError("connection reset"))) is None
    assert refused_by_guard(_caused_by(OSError("connection reset"), 3)) is None
