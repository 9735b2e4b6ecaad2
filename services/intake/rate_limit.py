"""Per-client submission rate limit: a token bucket, told in the RateLimit headers.

The headers follow the IETF httpapi draft "RateLimit header fields for HTTP"
(`RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset`, `RateLimit-Policy`).
Each intake instance keeps its own buckets; with N instances a client may submit up to
N times the rate, which the per-client ceiling on jobs not yet final bounds anyway.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

from shared.domain.errors import GradeqError
from shared.ports import Clock


@dataclass(frozen=True)
class Quota:
    """What the last check left: the numbers the headers carry."""

    limit: int
    remaining: int
    reset_s: int
    window_s: int

    def headers(self) -> dict[str, str]:
        return {
            "RateLimit-Limit": str(self.limit),
            "RateLimit-Remaining": str(self.remaining),
            "RateLimit-Reset": str(self.reset_s),
            "RateLimit-Policy": f"{self.limit};w={self.window_s}",
        }


class RateLimited(GradeqError):
    slug = "rate-limited"
    title = "Too many submissions from this client"
    status = 429

    def __init__(self, detail: str, retry_after_s: int, quota: Quota) -> None:
        super().__init__(detail)
        self.retry_after_s = retry_after_s
        self.quota = quota


class SubmissionRateLimiter:
    """A bucket of `burst` tokens per client, refilled at `rate_per_s`; one per submission."""

    def __init__(self, burst: int, rate_per_s: float, clock: Clock) -> None:
        self._burst = burst
        self._rate = rate_per_s
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # client -> (tokens, at)
        self._lock = threading.Lock()

    def take(self, client_id: str) -> Quota:
        """Spend one token, or raise RateLimited (carrying the quota) when there is none."""
        now = self._clock.now().timestamp()
        with self._lock:
            tokens, at = self._buckets.get(client_id, (float(self._burst), now))
            tokens = min(float(self._burst), tokens + max(0.0, now - at) * self._rate)
            allowed = tokens >= 1.0
            if allowed:
                tokens -= 1.0
            self._buckets[client_id] = (tokens, now)
        quota = Quota(
            limit=self._burst,
            remaining=math.floor(tokens),
            reset_s=math.ceil((self._burst - tokens) / self._rate),
            window_s=math.ceil(self._burst / self._rate),
        )
        if not allowed:
            raise RateLimited(
                f"at most {self._burst} submissions at once, then {self._rate:g} a second",
                retry_after_s=max(1, math.ceil((1.0 - tokens) / self._rate)),
                quota=quota,
            )
        return quota
