"""Limits on failed authentications: per failing credential, and per address for the rest.

Every refused credential may have cost a key-store read or a signature check. A credential
refused `burst` times is answered 429 (with Retry-After) before it is looked up again,
until its bucket refills at `rate_per_s`. The bucket is that credential's own (a digest of
it, apart for each kind of route: client, reviewer, operator), so a valid key or token is
never refused because another credential failed, even from the same address (a school's
students, teachers and server behind one NAT address). Successful calls cost nothing.

What cannot be attributed to a credential (no bearer credential, or one shaped like none
the route takes) counts against the caller's address instead, and that address limit is
looked at only once such a request has already failed: it turns the refusal into a 429
and never stands before a credential.

The address is the peer's, or behind proxies that append to X-Forwarded-For (Cloud Run's
front is one), the entry `trusted_hops` from the right: entries further left are what
the caller wrote and prove nothing.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from typing import TypeVar

from flask import request

from shared.domain.errors import GradeqError
from shared.http.errors import Unauthenticated
from shared.http.token_buckets import TokenBuckets
from shared.ports import Clock

#: Credentials, and addresses, tracked at once at most; past it the least recently failing
#: one is forgotten.
MAX_TRACKED = 100_000

T = TypeVar("T")


class TooManyFailedAuthentications(GradeqError):
    slug = "too-many-failed-authentications"
    title = "Too many failed authentications"
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


def presented_credential() -> str | None:
    """The credential of `Authorization: Bearer <credential>`, or None (never raises)."""
    scheme, _, credential = request.headers.get("Authorization", "").partition(" ")
    credential = credential.strip()
    if scheme.lower() != "bearer" or not credential:
        return None
    return credential


def _any_credential(_credential: str) -> bool:
    return True


class FailedAuthLimiter:
    """`burst` failures per credential (and per address for unattributable ones), then one
    per 1 / `rate_per_s` seconds."""

    def __init__(
        self,
        burst: int,
        rate_per_s: float,
        clock: Clock,
        address: Callable[[], str] = lambda: client_address(0),
        max_tracked: int = MAX_TRACKED,
    ) -> None:
        self._credentials = TokenBuckets(burst, rate_per_s, clock, max_keys=max_tracked)
        self._addresses = TokenBuckets(burst, rate_per_s, clock, max_keys=max_tracked)
        self._address = address

    def guard(
        self,
        kind: str,
        authenticate: Callable[[], T],
        attributable: Callable[[str], bool] = _any_credential,
        refused: tuple[type[Exception], ...] = (Unauthenticated,),
    ) -> T:
        """Run `authenticate`; count its `refused` errors against the credential presented
        (when `attributable` says it is one this kind of route takes) or else the address.

        Raise TooManyFailedAuthentications before `authenticate` runs for a credential past
        its failures, or instead of the refusal for an address past its failures.
        """
        credential = presented_credential()
        subject = None
        if credential is not None and attributable(credential):
            subject = f"{kind}:{hashlib.sha256(credential.encode()).hexdigest()}"
            self._refuse_if_spent(subject)
        try:
            return authenticate()
        except refused:
            if subject is not None:
                self._credentials.take(subject)
                raise
            allowed, tokens = self._addresses.take(self._address())
            if not allowed:
                raise TooManyFailedAuthentications(
                    "too many failed authentications from this address without a "
                    "credential this route takes; try again later",
                    self._wait_s(tokens, self._addresses),
                ) from None
            raise

    def _refuse_if_spent(self, subject: str) -> None:
        tokens = self._credentials.tokens(subject)
        if tokens < 1.0:
            raise TooManyFailedAuthentications(
                "too many failed authentications with this credential; try again later",
                self._wait_s(tokens, self._credentials),
            )

    @staticmethod
    def _wait_s(tokens: float, buckets: TokenBuckets) -> int:
        return max(1, math.ceil((1.0 - tokens) / buckets.rate_per_s))
