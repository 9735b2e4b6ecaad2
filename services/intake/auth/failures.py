"""A limit on failed authentications per caller address.

Every refused credential may have cost a key-store read or a signature check; past
`burst` failures an address is answered 429 (with Retry-After) before anything is looked
up, until its bucket refills at `rate_per_s`. Successful calls cost nothing from it.

The address is the peer's, or behind proxies that append to X-Forwarded-For (Cloud Run's
front is one), the entry `trusted_hops` from the right: entries further left are what
the caller wrote and prove nothing.
"""

from __future__ import annotations

import math

from flask import request

from services.intake.limits.token_buckets import TokenBuckets
from shared.domain.errors import GradeqError
from shared.ports import Clock

#: Addresses tracked at once at most; past it the least recently failing one is forgotten.
MAX_ADDRESSES = 100_000


class TooManyFailedAuthentications(GradeqError):
    slug = "too-many-failed-authentications"
    title = "Too many failed authentications from this address"
    status = 429

    def __init__(self, detail: str, retry_after_s: int) -> None:
        super().__init__(detail)
        self.retry_after_s = retry_after_s


def client_address(trusted_hops: int) -> str:
    """The caller's address as the trusted proxies saw it (the peer's with none)."""
    if trusted_hops > 0:
        forwarded = request.headers.get("X-Forwarded-For", "").split(",")
        hops = [hop.strip() for hop in forwarded if hop.strip()]
        if len(hops) >= trusted_hops:
            return hops[-trusted_hops]
    return request.remote_addr or "unknown"


class FailedAuthLimiter:
    """`burst` failed authentications per address, then one per 1 / `rate_per_s` seconds."""

    def __init__(
        self, burst: int, rate_per_s: float, clock: Clock, max_addresses: int = MAX_ADDRESSES
    ) -> None:
        self._buckets = TokenBuckets(burst, rate_per_s, clock, max_keys=max_addresses)

    def check(self, address: str) -> None:
        """Raise TooManyFailedAuthentications while `address` has no failures left."""
        tokens = self._buckets.tokens(address)
        if tokens < 1.0:
            wait = math.ceil((1.0 - tokens) / self._buckets.rate_per_s)
            raise TooManyFailedAuthentications(
                "too many failed authentications from this address; try again later",
                retry_after_s=max(1, wait),
            )

    def failed(self, address: str) -> None:
        """Count one failed authentication of `address`."""
        self._buckets.take(address)
