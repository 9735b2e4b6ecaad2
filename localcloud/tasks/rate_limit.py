"""A token bucket: the queue's max_dispatches_per_second with a small burst."""

from __future__ import annotations

import math
import time
from collections.abc import Callable


def burst_size(rate: float) -> float:
    """Derive the burst from the rate, as Cloud Tasks derives max_burst_size.

    A tenth of a second's worth, at least one: bursts stay small so a backlog is spread
    over time instead of hitting the target at once.
    """
    return max(1.0, math.floor(rate / 10))


class TokenBucket:
    """Refills at `rate` tokens a second up to `burst`; one token per dispatch."""

    def __init__(
        self, rate: float, burst: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if rate <= 0:
            raise ValueError("rate must be positive")
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._tokens = burst
        self._stamp = clock()

    def available(self) -> int:
        """Whole tokens available now."""
        self._refill()
        return int(self._tokens)

    def take(self) -> None:
        """Spend one token (call only after `available()` said there was one)."""
        self._refill()
        self._tokens -= 1

    def wait_time(self) -> float:
        """Seconds until one whole token is available."""
        self._refill()
        return max(0.0, (1 - self._tokens) / self.rate)

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now
