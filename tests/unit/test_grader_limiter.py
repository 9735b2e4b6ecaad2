"""The provider quota limiter: an instance's share, and requests/tokens per rolling minute."""

from __future__ import annotations

import random
import threading
from bisect import bisect_left

import pytest

from shared.adapters.graders.limiter import WINDOW_S, QuotaShare, RollingLimiter
from shared.domain.errors import ProviderQuotaExhausted


class FakeTime:
    """A monotonic clock the test moves; safe to share between threads.

    `last_read()` is the time this thread last read, i.e. the limiter's "now".
    """

    def __init__(self) -> None:
        self._now = 1000.0
        self._lock = threading.Lock()
        self._local = threading.local()

    def __call__(self) -> float:
        with self._lock:
            self._local.last = self._now
            return self._now

    def last_read(self) -> float:
        last: float = self._local.last
        return last

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds


def test_the_instance_share_of_the_project_quota() -> None:
    # 300 RPM and 1M TPM for the project, 90 % of it used, over 20 instances.
    share = QuotaShare.of(300, 1_000_000, max_instances=20, headroom=0.9)
    assert share == QuotaShare(requests_per_minute=13, tokens_per_minute=45_000)
    # throughput x latency: 13 requests a minute of 30 s each keep 6.5 requests in flight.
    assert share.concurrency_for(30) == pytest.approx(6.5)
    assert QuotaShare.of(5, 0, max_instances=20, headroom=1) == QuotaShare(1, 0)
    with pytest.raises(ValueError, match="max_instances"):
        QuotaShare.of(10, 0, max_instances=0, headroom=1)


def test_requests_beyond_the_share_wait_for_the_oldest_to_leave_the_window() -> None:
    time = FakeTime()
    limiter = RollingLimiter(QuotaShare(3, 0), clock=time)
    for _ in range(3):
        limiter.acquire(10)
        time.advance(5)
    with pytest.raises(ProviderQuotaExhausted) as caught:
        limiter.acquire(10)
    assert caught.value.retry_after_s == pytest.approx(WINDOW_S - 15)
    assert caught.value.status == 429
    time.advance(WINDOW_S - 15)
    limiter.acquire(10)  # the first request left the window
    assert limiter.in_window() == (3, 30)


def test_tokens_per_minute_and_settling_the_estimate() -> None:
    time = FakeTime()
    limiter = RollingLimiter(QuotaShare(100, 1000), clock=time)
    first = limiter.acquire(600)
    time.advance(10)
    with pytest.raises(ProviderQuotaExhausted) as caught:
        limiter.acquire(600)
    assert caught.value.retry_after_s == pytest.approx(WINDOW_S - 10)
    first.settle(200)  # the request took fewer tokens than reserved
    limiter.acquire(600)
    assert limiter.in_window() == (2, 800)


def test_a_request_larger_than_the_token_share_runs_alone() -> None:
    time = FakeTime()
    limiter = RollingLimiter(QuotaShare(100, 1000), clock=time)
    limiter.acquire(5000)
    with pytest.raises(ProviderQuotaExhausted):
        limiter.acquire(1)
    time.advance(WINDOW_S)
    limiter.acquire(1)


def test_fifty_threads_never_exceed_n_requests_per_rolling_minute() -> None:
    n = 7
    time = FakeTime()
    limiter = RollingLimiter(QuotaShare(n, 0), clock=time)
    granted: list[float] = []
    refused = 0
    lock = threading.Lock()
    start = threading.Barrier(50)

    def worker(seed: int) -> None:
        nonlocal refused
        rng = random.Random(seed)
        start.wait()
        for _ in range(200):
            try:
                limiter.acquire(1)
                with lock:
                    granted.append(time.last_read())
            except ProviderQuotaExhausted as exc:
                assert exc.retry_after_s is not None and exc.retry_after_s > 0
                with lock:
                    refused += 1
            time.advance(rng.uniform(0, 0.2))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    granted.sort()
    span = granted[-1] - granted[0]
    assert span > 5 * WINDOW_S  # the run covers many windows
    for i, at in enumerate(granted):
        in_window = bisect_left(granted, at + WINDOW_S) - i
        assert in_window <= n, f"{in_window} requests in the minute from {at}"
    # The share is used, not starved: about n per minute over the run.
    assert len(granted) >= n * int(span // WINDOW_S)
    assert refused > 0
