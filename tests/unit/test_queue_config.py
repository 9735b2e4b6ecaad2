"""Queue settings: the Cloud Tasks backoff formula and the final-attempt rule."""

from __future__ import annotations

from datetime import timedelta

import pytest

from shared.config.queues import RetryConfig, load_queues, parse_duration


def config(max_attempts: int = 5, max_retry_duration: float = 0) -> RetryConfig:
    return RetryConfig(
        max_attempts=max_attempts,
        max_retry_duration=timedelta(seconds=max_retry_duration),
        min_backoff=timedelta(seconds=10),
        max_backoff=timedelta(seconds=300),
        max_doublings=3,
    )


def test_backoff_doubles_then_grows_linearly_then_caps() -> None:
    # The example of the Cloud Tasks RetryConfig reference.
    delays = [config().backoff(n).total_seconds() for n in range(1, 9)]
    assert delays == [10, 20, 40, 80, 160, 240, 300, 300]


def test_last_attempt_needs_both_limits() -> None:
    assert not config(5).is_last_attempt(3)
    assert config(5).is_last_attempt(4)
    assert not config(-1).is_last_attempt(100)
    bounded = config(5, max_retry_duration=600)
    assert not bounded.is_last_attempt(4, elapsed=timedelta(seconds=100))
    assert bounded.is_last_attempt(4, elapsed=timedelta(seconds=601))


def test_shipped_settings_file_is_valid() -> None:
    queue = load_queues()["grading"]
    assert queue.target_path == "/tasks/grade"
    assert timedelta(seconds=15) <= queue.dispatch_deadline <= timedelta(minutes=30)
    assert 0 < queue.rate_limits.max_dispatches_per_second <= 500
    assert 0 < queue.rate_limits.max_concurrent_dispatches <= 5000


@pytest.mark.parametrize("bad", ["10", "10m", "", "s"])
def test_durations_must_be_seconds(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(bad)
