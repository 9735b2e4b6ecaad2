"""Per-client submission rate limit: a token bucket, told in the RateLimit headers.

The headers follow the IETF httpapi draft "RateLimit header fields for HTTP"
(`RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset`, `RateLimit-Policy`).
Each intake instance keeps its own buckets; with N instances a client may submit up to
N times the rate, which the per-client ceiling on jobs not yet final bounds anyway. The
bucket is the client's: its signed-in users' scopes draw on it too. A bucket that has
refilled is the same as none, so such buckets are dropped as the limiter goes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from flask import Response, current_app, g

from shared.domain.client_ids import owning_client
from shared.domain.errors import GradeqError
from shared.http.token_buckets import TokenBuckets
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


#: Answers of a batch that cost one submission token: a batch of 1,000 answers spends 20.
BATCH_ANSWERS_PER_TOKEN = 50


class SubmissionRateLimiter:
    """A bucket of `burst` tokens per client, refilled at `rate_per_s`; one per submission,
    one per BATCH_ANSWERS_PER_TOKEN answers of a batch (`batch_cost`)."""

    def __init__(self, burst: int, rate_per_s: float, clock: Clock) -> None:
        self._buckets = TokenBuckets(burst, rate_per_s, clock)
        self._burst = burst
        self._rate = rate_per_s

    def __len__(self) -> int:
        """How many buckets are kept (only those not yet refilled, give or take a sweep)."""
        return len(self._buckets)

    def batch_cost(self, answers: int) -> int:
        """The tokens a batch of `answers` spends: one per BATCH_ANSWERS_PER_TOKEN answers
        begun, and never more than the burst (a full bucket always admits a batch)."""
        return min(self._burst, max(1, math.ceil(answers / BATCH_ANSWERS_PER_TOKEN)))

    def take(self, scope: str, cost: int = 1) -> Quota:
        """Spend `cost` of the client's tokens (`scope` may be a user's within it), or raise
        RateLimited (carrying the quota) when it has fewer."""
        allowed, tokens = self._buckets.take(owning_client(scope), float(cost))
        quota = Quota(
            limit=self._burst,
            remaining=math.floor(tokens),
            reset_s=math.ceil((self._burst - tokens) / self._rate),
            window_s=math.ceil(self._burst / self._rate),
        )
        if not allowed:
            raise RateLimited(
                f"at most {self._burst} submissions at once, then {self._rate:g} a second",
                retry_after_s=max(1, math.ceil((cost - tokens) / self._rate)),
                quota=quota,
            )
        return quota


def spend_submissions(scope: str, cost: int = 1) -> None:
    """Spend the request's submission tokens; the quota left goes out in its headers."""
    limiter: SubmissionRateLimiter = current_app.extensions["gradeq.rate_limiter"]
    try:
        g.rate_quota = limiter.take(scope, cost)
    except RateLimited as exc:
        g.rate_quota = exc.quota
        raise


def batch_cost(answers: int) -> int:
    """The tokens a batch of `answers` spends (`SubmissionRateLimiter.batch_cost`)."""
    limiter: SubmissionRateLimiter = current_app.extensions["gradeq.rate_limiter"]
    return limiter.batch_cost(answers)


def rate_limit_headers(response: Response) -> Response:
    """Tell the quota the request left (an after_request hook of the submitting routes)."""
    quota = g.get("rate_quota")
    if quota is not None:
        response.headers.update(quota.headers())
    return response
