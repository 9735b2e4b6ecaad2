"""What the callback guard's lookups may cost: a bounded cache, a deadline per lookup and
a cap on the names one request makes it resolve. The guard is called directly with an
injected resolver; no test asks real DNS."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from flask.testing import FlaskClient

from services.intake.app import create_app
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.http.callback_guard import (
    CachedResolver,
    CallbackGuard,
    CallbackRefused,
    Resolver,
    TooManyCallbackHosts,
)
from tests.unit.test_assignments_api import ASSIGNMENT, assert_problem, create, submit


class CountingResolver:
    """Answers from a table, counting what it is asked; unknown names do not resolve."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.asked: list[str] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        if host not in self.table:
            raise OSError(f"no such host {host}")
        return self.table[host]


class Timer:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


PUBLIC = {f"h{i}.example.com": ["93.184.216.34"] for i in range(10)}


def _cached(resolver: Any, timer: Timer | None = None, **kw: Any) -> CachedResolver:
    return CachedResolver(resolver, timer=timer or Timer(), **kw)


def test_a_name_is_looked_up_once_for_many_checks() -> None:
    dns = CountingResolver(PUBLIC)
    guard = CallbackGuard(_cached(dns))
    for i in range(1_000):
        assert guard.check(f"https://h1.example.com/hook/{i}") == ["93.184.216.34"]
    assert dns.asked == ["h1.example.com"]


def test_a_name_that_does_not_resolve_is_remembered_and_refused_each_time() -> None:
    dns = CountingResolver(PUBLIC)
    guard = CallbackGuard(_cached(dns))
    for _ in range(3):
        with pytest.raises(CallbackRefused):
            guard.check("https://nowhere.example.com/hook")
    assert dns.asked == ["nowhere.example.com"]


def test_an_answer_is_looked_up_again_after_its_ttl() -> None:
    dns = CountingResolver(PUBLIC)
    timer = Timer()
    guard = CallbackGuard(_cached(dns, timer, ttl_s=60))
    guard.check("https://h1.example.com/hook")
    timer.now = 59.0
    guard.check("https://h1.example.com/hook")
    timer.now = 61.0
    guard.check("https://h1.example.com/hook")
    assert dns.asked == ["h1.example.com", "h1.example.com"]


def test_the_cache_keeps_at_most_its_size() -> None:
    dns = CountingResolver(PUBLIC)
    guard = CallbackGuard(_cached(dns, size=2))
    for name in ("h1", "h2", "h3", "h1"):
        guard.check(f"https://{name}.example.com/hook")
    assert dns.asked == [f"{n}.example.com" for n in ("h1", "h2", "h3", "h1")]


@pytest.fixture
def stuck() -> Iterator[tuple[threading.Event, Resolver]]:
    """A resolver that answers only once the test releases it (at the latest, at teardown)."""
    release = threading.Event()
    dns = CountingResolver(PUBLIC)

    def slow(host: str, port: int) -> list[str]:
        release.wait()
        return dns(host, port)

    yield release, slow
    release.set()


def test_a_lookup_past_its_deadline_is_refused(stuck: tuple[threading.Event, Resolver]) -> None:
    release, slow = stuck
    guard = CallbackGuard(_cached(slow, timeout_s=0.05))
    with pytest.raises(CallbackRefused, match="no answer within"):
        guard.check("https://h1.example.com/hook")
    assert not release.is_set()  # refused while the lookup still hung


def test_hung_lookups_hold_no_more_threads_than_the_pool_has(
    stuck: tuple[threading.Event, Resolver],
) -> None:
    release, slow = stuck

    def resolver(host: str, port: int) -> list[str]:
        return ["93.184.216.34"] if host == "h0.example.com" else slow(host, port)

    cached = _cached(resolver, timeout_s=0.2, threads=2)
    for name in ("h1", "h2"):
        with pytest.raises(OSError, match="no answer within"):
            cached(f"{name}.example.com", 443)
    # Both threads hang: a third name, however quick to answer, waits for one of them.
    with pytest.raises(OSError, match="no answer within"):
        cached("h0.example.com", 443)
    release.set()
    assert cached("h3.example.com", 443) == ["93.184.216.34"]  # freed threads answer again


def test_lookups_run_on_threads_named_for_them_in_a_thread_dump() -> None:
    names: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        names.append(threading.current_thread().name)
        return ["93.184.216.34"]

    _cached(resolver)("h1.example.com", 443)
    assert names and names[0].startswith("dns_")


def test_a_request_naming_too_many_hosts_is_refused_before_any_lookup() -> None:
    dns = CountingResolver(PUBLIC)
    guard = CallbackGuard(_cached(dns), max_hosts_per_request=3)
    urls = [f"https://h{i % 4}.example.com/hook/{i}" for i in range(100)]
    with pytest.raises(TooManyCallbackHosts) as caught:
        guard.check_hosts(urls)
    assert caught.value.status == 400
    assert dns.asked == []
    guard.check_hosts(urls[:3] * 30)  # three names, however many URLs: allowed
    with pytest.raises(TooManyCallbackHosts):  # unparsable URLs count, never a 500
        guard.check_hosts([*urls[:3], "https://[::1/h", "https://[fe80::1/h"])


@pytest.fixture
def counted() -> CountingResolver:
    return CountingResolver(PUBLIC)


@pytest.fixture
def client(
    settings: Settings, adapters: Adapters, clock: FrozenClock, counted: CountingResolver
) -> FlaskClient:
    guard = CallbackGuard(_cached(counted), max_hosts_per_request=3)
    return create_app(settings, adapters, clock, guard).test_client()


def test_a_batch_naming_too_many_callback_hosts_is_refused_whole(
    client: FlaskClient, counted: CountingResolver
) -> None:
    assignment = create(client, body=ASSIGNMENT).get_json()["id"]
    items = [
        {"submission_id": f"s{i}", "answer": "light", "callback_url": f"https://h{i}.example.com/h"}
        for i in range(4)
    ]
    assert_problem(submit(client, assignment, items), 400, "too-many-callback-hosts")
    assert counted.asked == []
    ok = submit(client, assignment, items[:3] * 1)
    assert ok.status_code == 200, ok.get_json()
    assert sorted(counted.asked) == ["h0.example.com", "h1.example.com", "h2.example.com"]


def test_a_name_is_looked_up_once_whatever_the_port() -> None:
    dns = CountingResolver(PUBLIC)
    guard = CallbackGuard(_cached(dns), allowed_ports=[8443, 9443])
    for port in (443, 8443, 9443):
        guard.check(f"https://h1.example.com:{port}/hook")
    assert dns.asked == ["h1.example.com"]
