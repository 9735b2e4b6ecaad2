"""A provider quota limiter: requests and tokens per rolling minute, for one instance.

A provider grants a project a quota per model (requests per minute, tokens per minute).
Every worker instance takes an equal share of it, so the instances together stay within
the quota however many Cloud Run starts (up to its max instances). Inside an instance one
limiter is shared by all request threads.

The limiter never waits: when the window has no room it raises `ProviderQuotaExhausted`
with the time until it will, and the worker hands that wait to the queue (429 with
Retry-After) instead of holding a thread.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from shared.domain.errors import ProviderQuotaExhausted

WINDOW_S = 60.0


@dataclass(frozen=True)
class QuotaShare:
    """One instance's share of a project quota; 0 tokens per minute means no token limit."""

    requests_per_minute: int
    tokens_per_minute: int = 0

    @classmethod
    def of(
        cls, project_rpm: int, project_tpm: int, max_instances: int, headroom: float
    ) -> QuotaShare:
        """Split the project quota evenly over `max_instances`, keeping `1 - headroom` spare.

        share = floor(quota x headroom / max_instances), at least 1 request a minute.
        """
        if max_instances < 1:
            raise ValueError("max_instances must be at least 1")
        rpm = max(1, math.floor(project_rpm * headroom / max_instances))
        tpm = 0 if project_tpm <= 0 else max(1, math.floor(project_tpm * headroom / max_instances))
        return cls(rpm, tpm)

    def concurrency_for(self, latency_s: float) -> float:
        """Requests in flight needed to use the share: throughput x latency."""
        return self.requests_per_minute / WINDOW_S * latency_s


class _Entry:
    __slots__ = ("at", "tokens")

    def __init__(self, at: float, tokens: int) -> None:
        self.at = at
        self.tokens = tokens


class Reservation:
    """One request admitted by the limiter; `settle` corrects its token estimate."""

    def __init__(self, limiter: RollingLimiter, entry: _Entry) -> None:
        self._limiter = limiter
        self._entry = entry

    def settle(self, tokens: int) -> None:
        """Replace the estimate with the tokens the request really took."""
        self._limiter._settle(self._entry, tokens)

    def throttled(self) -> None:
        """The provider answered 429 (a limiter that learns from it takes note)."""


class QuotaLimiter(Protocol):
    """What a model grader asks before each provider request."""

    share: QuotaShare

    def acquire(self, tokens: int) -> Reservation:
        """Admit one request expected to take `tokens`, or raise `ProviderQuotaExhausted`."""
        ...


class RollingLimiter:
    """Admits a request only when the last 60 s hold fewer than the share's requests and tokens.

    Thread-safe. `clock` is a monotonic time source in seconds (tests pass a fake one).
    """

    def __init__(self, share: QuotaShare, clock: Callable[[], float] = time.monotonic) -> None:
        self.share = share
        self._clock = clock
        self._entries: deque[_Entry] = deque()
        self._tokens = 0
        self._lock = threading.Lock()

    def acquire(self, tokens: int) -> Reservation:
        """Admit one request expected to take `tokens`, or raise `ProviderQuotaExhausted`.

        A request larger than the whole token share is admitted into an empty window, so
        it runs alone rather than never.
        """
        with self._lock:
            now = self._clock()
            self._expire(now)
            wait = self._wait_for(now, tokens)
            if wait > 0:
                raise ProviderQuotaExhausted(
                    f"this instance's provider quota ({self.share.requests_per_minute} "
                    f"requests, {self.share.tokens_per_minute or 'unlimited'} tokens a "
                    "minute) has no room",
                    retry_after_s=wait,
                )
            entry = _Entry(now, tokens)
            self._entries.append(entry)
            self._tokens += tokens
            return Reservation(self, entry)

    def in_window(self) -> tuple[int, int]:
        """Requests and tokens counted in the current window."""
        with self._lock:
            self._expire(self._clock())
            return len(self._entries), self._tokens

    def _expire(self, now: float) -> None:
        while self._entries and self._entries[0].at <= now - WINDOW_S:
            self._tokens -= self._entries.popleft().tokens

    def _wait_for(self, now: float, tokens: int) -> float:
        wait = 0.0
        if len(self._entries) >= self.share.requests_per_minute:
            oldest = self._entries[len(self._entries) - self.share.requests_per_minute]
            wait = oldest.at + WINDOW_S - now
        limit = self.share.tokens_per_minute
        if limit and self._entries and self._tokens + tokens > limit:
            # Wait until enough old requests leave the window (or all of them, for a
            # request larger than the share).
            needed = self._tokens + tokens - limit
            freed = 0
            for entry in self._entries:
                freed += entry.tokens
                if freed >= needed:
                    break
            wait = max(wait, entry.at + WINDOW_S - now)
        return wait

    def _settle(self, entry: _Entry, tokens: int) -> None:
        with self._lock:
            if entry in self._entries:
                self._tokens += tokens - entry.tokens
            entry.tokens = tokens
