"""Reviewer keys: configured in clear or as the SHA-256 digest of the key, each speaks for
one school as one named reviewer."""

from __future__ import annotations

import hashlib

from services.intake.auth.reviewers import ReviewerKeys


def test_a_key_configured_as_its_digest_is_matched_by_the_key_itself() -> None:
    digest = hashlib.sha256(b"rk-secret").hexdigest()
    keys = ReviewerKeys({f"sha256:{digest}": ("school-a", "ana"), "rk-clear": ("school-b", "bo")})
    assert keys.match("rk-secret") == ("school-a", "ana")
    assert keys.match("rk-clear") == ("school-b", "bo")
    assert keys.match(f"sha256:{digest}") is None  # the digest is not the key
    assert keys.match("rk-other") is None
