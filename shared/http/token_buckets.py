"""Token buckets by key, held in memory; buckets that have refilled are dropped.

A bucket untouched for the time it takes to fill is full, the same as no bucket, so the
sweep that drops those changes no answer; `max_keys` bounds memory when more keys than
that are in use at once (the least recently used bucket goes first).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from shared.ports import Clock


class TokenBuckets:
    """`burst` tokens per key, refilled at `rate_per_s`."""

    def __init__(
        self, burst: int, rate_per_s: float, clock: Clock, max_keys: int | None = None
    ) -> None:
        self.burst = burst
        self.rate_per_s = rate_per_s
        self._clock = clock
        self._max_keys = max_keys
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # (tokens, at)
        self._lock = threading.Lock()
        # The time for an empty bucket to fill: a bucket untouched for this long is full.
        self._refill_s = burst / rate_per_s
        self._swept_at = clock.now().timestamp()

    def __len__(self) -> int:
        """How many buckets are kept (only those not yet refilled, give or take a sweep)."""
        with self._lock:
            return len(self._buckets)

    def take(self, key: str, cost: float = 1.0) -> tuple[bool, float]:
        """Spend `cost` tokens of `key` if it has them: (whether it had, the tokens left)."""
        return self._settle(key, spend=True, cost=cost)

    def tokens(self, key: str) -> float:
        """The tokens `key` has now, spending none."""
        return self._settle(key, spend=False)[1]

    def _settle(self, key: str, spend: bool, cost: float = 1.0) -> tuple[bool, float]:
        now = self._clock.now().timestamp()
        with self._lock:
            self._sweep(now)
            tokens, at = self._buckets.pop(key, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + max(0.0, now - at) * self.rate_per_s)
            allowed = tokens >= cost
            if spend and allowed:
                tokens -= cost
            if tokens < self.burst:
                self._buckets[key] = (tokens, now)  # re-inserted last: most recently used
                if self._max_keys is not None and len(self._buckets) > self._max_keys:
                    self._buckets.popitem(last=False)
        return allowed, tokens

    def _sweep(self, now: float) -> None:
        """Drop buckets that have refilled; at most once per refill time, so O(1) amortised."""
        if now - self._swept_at < self._refill_s:
            return
        self._swept_at = now
        full = [k for k, (_, at) in self._buckets.items() if now - at >= self._refill_s]
        for key in full:
            del self._buckets[key]
