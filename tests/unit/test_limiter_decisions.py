"""The limiter's decisions: the instance's share of a project quota (its floors and the
token limit's off switch), the edges of the rolling window, when a request or its tokens
fit, how long a refused one waits, what the refusal says, and settling an estimate."""

from __future__ import annotations

import pytest

from shared.adapters.graders.limiter import WINDOW_S, QuotaShare, RollingLimiter
from shared.domain.errors import ProviderQuotaExhausted


class Ticks:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _refusal(limiter: RollingLimiter, tokens: int) -> ProviderQuotaExhausted:
    with pytest.raises(ProviderQuotaExhausted) as caught:
        limiter.acquire(tokens)
    return caught.value


# --- the share -------------------------------------------------------------------------


def test_a_share_without_a_token_quota_has_no_token_limit() -> None:
    assert QuotaShare(5) == QuotaShare(5, 0)
    assert QuotaShare.of(10, 0, max_instances=2, headroom=1) == QuotaShare(5, 0)
    assert QuotaShare.of(10, -5, max_instances=2, headroom=1) == QuotaShare(5, 0)


def test_a_token_quota_of_one_still_limits_tokens() -> None:
    assert QuotaShare.of(10, 1, max_instances=1, headroom=1) == QuotaShare(10, 1)


def test_a_tiny_share_is_at_least_one_request_and_one_token() -> None:
    assert QuotaShare.of(3, 3, max_instances=4, headroom=1) == QuotaShare(1, 1)
    assert QuotaShare.of(0, 5, max_instances=10, headroom=1) == QuotaShare(1, 1)


def test_a_share_is_rounded_down() -> None:
    # 100 x 0.5 / 3 = 16.67 requests, 1000 x 0.5 / 3 = 166.7 tokens.
    assert QuotaShare.of(100, 1000, max_instances=3, headroom=0.5) == QuotaShare(16, 166)
    assert QuotaShare.of(7, 7, max_instances=1, headroom=1) == QuotaShare(7, 7)


def test_one_instance_is_the_least_there_can_be() -> None:
    assert QuotaShare.of(4, 8, max_instances=1, headroom=1) == QuotaShare(4, 8)
    for count in (0, -1):
        with pytest.raises(ValueError) as raised:
            QuotaShare.of(4, 8, max_instances=count, headroom=1)
        assert str(raised.value) == "max_instances must be at least 1"


def test_the_concurrency_that_uses_a_share() -> None:
    assert QuotaShare(120).concurrency_for(3) == pytest.approx(6.0)
    assert QuotaShare(30, 5).concurrency_for(10) == pytest.approx(5.0)


# --- requests --------------------------------------------------------------------------


def test_a_fresh_limiter_counts_nothing() -> None:
    limiter = RollingLimiter(QuotaShare(2, 0), clock=Ticks())
    assert limiter.share == QuotaShare(2, 0)
    assert limiter.in_window() == (0, 0)


def test_the_share_of_requests_fits_and_one_more_is_refused() -> None:
    ticks = Ticks()
    limiter = RollingLimiter(QuotaShare(2, 0), clock=ticks)
    limiter.acquire(0)
    ticks.now += 1
    limiter.acquire(0)
    assert limiter.in_window() == (2, 0)
    ticks.now += 1
    refusal = _refusal(limiter, 0)
    assert refusal.retry_after_s == pytest.approx(WINDOW_S - 2)
    assert refusal.detail == (
        "this instance's provider quota (2 requests, unlimited tokens a minute) has no room"
    )
    assert limiter.in_window() == (2, 0)


def test_the_refused_request_waits_for_the_oldest_of_the_share_to_leave() -> None:
    # Five requests in the window, a share of three: the third newest decides the wait.
    ticks = Ticks()
    limiter = RollingLimiter(QuotaShare(5, 0), clock=ticks)
    for _ in range(5):
        limiter.acquire(0)
        ticks.now += 1
    limiter.share = QuotaShare(3, 0)
    # Entries at 1000..1004, now 1005: the one at 1002 must leave, at 1062.
    assert _refusal(limiter, 0).retry_after_s == pytest.approx(57.0)


def test_a_request_leaves_the_window_exactly_a_window_later() -> None:
    ticks = Ticks()
    limiter = RollingLimiter(QuotaShare(1, 0), clock=ticks)
    limiter.acquire(4)
    ticks.now += WINDOW_S - 0.5
    assert _refusal(limiter, 1).retry_after_s == pytest.approx(0.5)
    assert limiter.in_window() == (1, 4)
    ticks.now += 0.5
    assert limiter.in_window() == (0, 0)
    limiter.acquire(1)
    assert limiter.in_window() == (1, 1)


def test_only_the_requests_that_left_are_dropped() -> None:
    ticks = Ticks()
    limiter = RollingLimiter(QuotaShare(10, 0), clock=ticks)
    limiter.acquire(1)
    ticks.now += 10
    limiter.acquire(2)
    ticks.now += 10
    limiter.acquire(4)
    ticks.now += WINDOW_S - 10  # the second request leaves now, the third is 10 s old
    assert limiter.in_window() == (1, 4)


# --- tokens ----------------------------------------------------------------------------


def test_tokens_up_to_the_share_fit_and_one_more_is_refused() -> None:
    ticks = Ticks()
    limiter = RollingLimiter(QuotaShare(10, 100), clock=ticks)
    limiter.acquire(60)
    ticks.now += 5
    limiter.acquire(40)
    assert limiter.in_window() == (2, 100)
    ticks.now += 5
    refusal = _refusal(limiter, 1)
    assert refusal.retry_after_s == pytest.approx(WINDOW_S - 10)
    assert refusal.detail == (
        "this instance's provider quota (10 requests, 100 tokens a minute) has no room"
    )


def test_a_refused_request_waits_until_enough_tokens_left() -> None:
    ticks = Ticks()
    limiter = RollingLimiter(QuotaShare(10, 100), clock=ticks)
    for tokens in (30, 30, 30):
        limiter.acquire(tokens)
        ticks.now += 10
    # 90 in the window, 40 asked: 20 must leave, the first request frees 30.
    assert _refusal(limiter, 40).retry_after_s == pytest.approx(WINDOW_S - 30)
    # 90 in the window, 60 asked: 50 must leave, the first two free exactly 60 >= 50.
    assert _refusal(limiter, 60).retry_after_s == pytest.approx(WINDOW_S - 20)
    # 70 asked: 60 must leave, exactly the first two.
    assert _refusal(limiter, 70).retry_after_s == pytest.approx(WINDOW_S - 20)
    # 71 asked: 61 must leave, all three.
    assert _refusal(limiter, 71).retry_after_s == pytest.approx(WINDOW_S - 10)


def test_the_longer_of_the_request_and_token_waits_is_given() -> None:
    ticks = Ticks()
    limiter = RollingLimiter(QuotaShare(2, 100), clock=ticks)
    limiter.acquire(10)
    ticks.now += 10
    limiter.acquire(80)
    ticks.now += 10
    # Requests: the first leaves in 40 s. Tokens: 90 + 50 - 100 = 40 must leave, both.
    assert _refusal(limiter, 50).retry_after_s == pytest.approx(WINDOW_S - 10)
    limiter.share = QuotaShare(1, 100)
    # Requests: the newest leaves in 50 s; tokens: 90 + 15 - 100 = 5, the first (40 s).
    assert _refusal(limiter, 15).retry_after_s == pytest.approx(WINDOW_S - 10)


def test_a_request_larger_than_the_share_is_admitted_alone() -> None:
    ticks = Ticks()
    limiter = RollingLimiter(QuotaShare(10, 100), clock=ticks)
    limiter.acquire(500)
    assert limiter.in_window() == (1, 500)
    ticks.now += 1
    assert _refusal(limiter, 500).retry_after_s == pytest.approx(WINDOW_S - 1)


def test_without_a_token_limit_any_tokens_fit() -> None:
    limiter = RollingLimiter(QuotaShare(3, 0), clock=Ticks())
    limiter.acquire(10**9)
    limiter.acquire(10**9)
    assert limiter.in_window() == (2, 2 * 10**9)


# --- settling --------------------------------------------------------------------------


def test_settling_replaces_the_estimate_in_the_window() -> None:
    ticks = Ticks()
    limiter = RollingLimiter(QuotaShare(10, 100), clock=ticks)
    first = limiter.acquire(90)
    limiter.acquire(5)
    first.settle(30)
    assert limiter.in_window() == (2, 35)
    first.settle(95)
    assert limiter.in_window() == (2, 100)
    assert _refusal(limiter, 1).retry_after_s == pytest.approx(WINDOW_S)
    first.throttled()  # a plain limiter learns nothing from a 429
    assert limiter.in_window() == (2, 100)


def test_settling_a_request_that_left_the_window_changes_no_count() -> None:
    ticks = Ticks()
    limiter = RollingLimiter(QuotaShare(10, 100), clock=ticks)
    old = limiter.acquire(50)
    ticks.now += WINDOW_S
    limiter.acquire(20)
    old.settle(90)
    assert limiter.in_window() == (1, 20)
    old.settle(10)  # its own record changes, still out of the window
    assert limiter.in_window() == (1, 20)
