"""The callback guard's checks, pinned refusal by refusal: which kind of address each one
is refused as (the reason the logs and the notifier's records carry), what makes a URL
not an absolute http(s) one or its port invalid, which port the lookup is asked for, and
how a host is read as an address or resolved, and which pools and connections the
guarded adapter builds. The guard is called directly with an injected resolver: nothing
is resolved by DNS and nothing is connected to."""

from __future__ import annotations

import pytest
import requests
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from shared.http.callback_guard import (
    CallbackGuard,
    CallbackRefused,
    GuardedAdapter,
    _Pinned,
    guarded_session,
)
from tests.unit.test_callback_dns import CountingResolver

PUBLIC_V4 = "93.184.216.34"
PUBLIC_V6 = "2606:4700::1"


class PortRecordingResolver(CountingResolver):
    """A table resolver that also records the port each lookup is asked for."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        super().__init__(table)
        self.ports: list[int] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.ports.append(port)
        return super().__call__(host, port)


def refusal_of(guard: CallbackGuard, url: str) -> str:
    with pytest.raises(CallbackRefused) as caught:
        guard.check(url)
    return caught.value.detail


# --- which kind of address a host is refused for ------------------------------------


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("10.0.0.1", "private"),
        ("169.254.169.254", "link-local (metadata)"),
        ("fe80::1", "link-local (metadata)"),
        ("fec0::1", "site-local"),
        ("fec0:1:2::3", "site-local"),
        ("64:ff9b::a00:1", "NAT64"),
        ("64:ff9b::5db8:d822", "NAT64"),  # even of a public IPv4 address
        ("64:ff9b:1::a00:1", "NAT64"),
        ("2001:0:4136:e378:8000:63bf:f5ff:fffe", "Teredo"),
        ("::a00:1", "IPv4-compatible"),
        ("::2", "IPv4-compatible"),  # the first IPv4-compatible address past ::1
        ("::5db8:d822", "IPv4-compatible"),
        ("2002:a00:1::1", "6to4 form of a private"),
        ("2002:7f00:1::1", "6to4 form of a loopback"),
        ("2002:a9fe:a9fe::1", "6to4 form of a link-local (metadata)"),
        ("224.0.0.1", "reserved"),  # multicast
        ("ff02::1", "reserved"),  # multicast
        ("4000::1", "reserved"),  # reserved by the IETF, neither multicast nor unspecified
        ("100.64.0.1", "non-public"),  # carrier-grade NAT: neither private nor global
    ],
)
def test_each_non_public_address_is_refused_naming_its_kind(address: str, kind: str) -> None:
    named = CallbackGuard(CountingResolver({"hooks.test": [address]}))
    assert refusal_of(named, "https://hooks.test/h") == (
        f"the callback host hooks.test resolves to a {kind} address ({address})"
    )
    literal = "[" + address + "]" if ":" in address else address
    assert refusal_of(CallbackGuard(CountingResolver({})), f"https://{literal}/h") == (
        f"the callback host {address} resolves to a {kind} address ({address})"
    )


@pytest.mark.parametrize("address", [PUBLIC_V4, PUBLIC_V6, "2002:5db8:d822::1"])
def test_a_public_address_is_allowed(address: str) -> None:
    guard = CallbackGuard(CountingResolver({"hooks.test": [address]}))
    assert guard.check("https://hooks.test/h") == [address]


def test_where_loopback_is_allowed_the_ipv6_loopback_is_too_but_not_its_6to4_form() -> None:
    local = CallbackGuard(CountingResolver({}), allow_loopback=True)
    assert local.check("https://[::1]/h") == ["::1"]
    assert local.check("http://[::1]:8123/h") == ["::1"]
    assert refusal_of(local, "https://[2002:7f00:1::1]/h") == (
        "the callback host 2002:7f00:1::1 resolves to a 6to4 form of a loopback address "
        "(2002:7f00:1::1)"
    )


# --- what the URL must be -----------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "ftp://hooks.test/h",
        "ws://hooks.test/h",
        "hooks.test/h",
        "//hooks.test/h",
        "https:///h",
        "http://:443/h",
        "",
    ],
)
def test_a_url_that_is_not_absolute_http_s_is_refused_as_such(url: str) -> None:
    dns = CountingResolver({"hooks.test": [PUBLIC_V4]})
    assert refusal_of(CallbackGuard(dns), url) == (
        "the callback URL is not an absolute http(s) URL"
    )
    assert dns.asked == []


@pytest.mark.parametrize(
    "url", ["https://hooks.test:99999/h", "https://hooks.test:https/h", "http://hooks.test:-1/h"]
)
def test_an_invalid_port_is_refused_naming_the_host(url: str) -> None:
    dns = CountingResolver({"hooks.test": [PUBLIC_V4]})
    assert refusal_of(CallbackGuard(dns), url) == (
        "the callback URL to hooks.test has an invalid port"
    )
    assert dns.asked == []


# --- the port the lookup is asked for -----------------------------------------------


def test_the_lookup_is_asked_for_the_port_the_url_names_or_its_schemes() -> None:
    dns = PortRecordingResolver({"hooks.test": [PUBLIC_V4]})
    guard = CallbackGuard(dns, allowed_ports=[8443])
    assert guard.check("https://hooks.test/h") == [PUBLIC_V4]
    assert guard.check("http://hooks.test/h") == [PUBLIC_V4]
    assert guard.check("https://hooks.test:8443/h") == [PUBLIC_V4]
    assert dns.ports == [443, 80, 8443]


def test_a_local_receiver_on_another_port_is_looked_up_for_that_port() -> None:
    dns = PortRecordingResolver({"receiver.test": ["127.0.0.1"]})
    local = CallbackGuard(dns, allow_loopback=True)
    assert local.check("http://receiver.test:8123/h") == ["127.0.0.1"]
    assert dns.asked == ["receiver.test"]
    assert dns.ports == [8123]


def test_vetting_a_name_asks_the_lookup_for_the_port_given() -> None:
    dns = PortRecordingResolver({"hooks.test": [PUBLIC_V4]})
    assert CallbackGuard(dns).vetted_addresses("hooks.test", 9443) == [PUBLIC_V4]
    assert dns.ports == [9443]


# --- how a host is read: an address, or a name to resolve ---------------------------


def test_an_ipv6_literal_in_brackets_is_read_as_the_address_without_a_lookup() -> None:
    dns = CountingResolver({})
    guard = CallbackGuard(dns)
    assert guard.vetted_addresses(f"[{PUBLIC_V6}]", 443) == [PUBLIC_V6]
    with pytest.raises(CallbackRefused) as caught:
        guard.vetted_addresses("[::1]", 443)
    assert caught.value.detail == "the callback host [::1] resolves to a loopback address (::1)"
    assert dns.asked == []


@pytest.mark.parametrize("host", ["X10.0.0.1X", "X10.0.0.1", " 10.0.0.1 ", "10.0.0.1\n"])
def test_only_brackets_are_taken_off_a_host_anything_else_makes_it_a_name(host: str) -> None:
    dns = CountingResolver({host: [PUBLIC_V4]})
    assert CallbackGuard(dns).vetted_addresses(host, 443) == [PUBLIC_V4]
    assert dns.asked == [host]


def test_the_zone_of_a_resolved_ipv6_address_is_left_out() -> None:
    dns = CountingResolver(
        {"public.test": [f"{PUBLIC_V6}%eth0", PUBLIC_V4], "local.test": ["fe80::1%eth0"]}
    )
    guard = CallbackGuard(dns)
    assert guard.vetted_addresses("public.test", 443) == [PUBLIC_V6, PUBLIC_V4]
    with pytest.raises(CallbackRefused) as caught:
        guard.vetted_addresses("local.test", 443)
    assert caught.value.detail == (
        "the callback host local.test resolves to a link-local (metadata) address (fe80::1)"
    )


def test_a_name_that_resolves_to_no_address_is_refused_as_not_resolving() -> None:
    guard = CallbackGuard(CountingResolver({"empty.test": []}))
    assert refusal_of(guard, "https://empty.test/h") == (
        "the callback host empty.test does not resolve"
    )


# --- the pools the guarded adapter builds --------------------------------------------


def test_the_guarded_adapter_pools_each_scheme_with_connections_that_carry_its_guard() -> None:
    guard = CallbackGuard(CountingResolver({}))
    manager = GuardedAdapter(guard).poolmanager
    assert manager.connection_pool_kw == {"maxsize": 10, "block": False}
    pools = manager.pool_classes_by_scheme
    assert sorted(pools) == ["http", "https"]
    expected = {
        "http": ("GuardedHTTPPool", HTTPConnectionPool, "GuardedHTTPConnection", HTTPConnection),
        "https": (
            "GuardedHTTPSPool",
            HTTPSConnectionPool,
            "GuardedHTTPSConnection",
            HTTPSConnection,
        ),
    }
    for scheme, (pool_name, pool_base, conn_name, conn_base) in expected.items():
        pool = pools[scheme]
        assert (pool.__name__, pool.__bases__) == (pool_name, (pool_base,))
        conn = pool.ConnectionCls
        assert (conn.__name__, conn.__bases__) == (conn_name, (_Pinned, conn_base))
        assert conn.guard is guard


@pytest.mark.parametrize(("scheme", "kind"), [("http", "HTTP"), ("https", "HTTPS")])
def test_a_refused_request_names_the_guarded_pool_and_connection(scheme: str, kind: str) -> None:
    # Refused before any connection is made: loopback is not allowed.
    session = guarded_session(CallbackGuard(CountingResolver({})))
    with pytest.raises(requests.ConnectionError) as caught:
        session.get(f"{scheme}://127.0.0.1:9/x", timeout=2)
    host = "host='127.0.0.1', port=9"
    assert str(caught.value) == (
        f"Guarded{kind}Pool({host}): Max retries exceeded with url: /x (Caused by "
        f'RefusedConnection("Guarded{kind}Connection({host}): the callback host 127.0.0.1 '
        'resolves to a loopback address (127.0.0.1)"))'
    )
