"""Reviewer keys (GRADEQ_REVIEWER_KEYS): each speaks for one school as a named reviewer.

Signed-in reviewers come by Firebase ID token instead (a role claim holding `reviewer`);
both become a `Principal` of role reviewer (services.intake.auth.clients).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping

_HASHED = "sha256:"


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


class ReviewerKeys:
    """The configured reviewer keys, compared by digest in constant time overall."""

    def __init__(self, keys: Mapping[str, tuple[str, str]]) -> None:
        self._digests = [
            (bytes.fromhex(k.removeprefix(_HASHED)) if k.startswith(_HASHED) else _digest(k), who)
            for k, who in keys.items()
        ]

    def __bool__(self) -> bool:
        return bool(self._digests)

    def match(self, credential: str) -> tuple[str, str] | None:
        """(school, reviewer name) of a reviewer key; None for any other credential."""
        digest = _digest(credential)
        match = None
        for known, who in self._digests:  # every digest compared: constant time overall
            if hmac.compare_digest(known, digest):
                match = who
        return match
