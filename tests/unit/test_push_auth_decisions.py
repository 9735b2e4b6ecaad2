"""Full ID token verification's decisions: the clock skew it tolerates on `exp` and `iat`,
and what each refusal tells the caller."""

from __future__ import annotations

import datetime as dt
import time

import pytest
from google.auth import _helpers, crypt

from localcloud.cloudrun import forwarded_id_token as minted_by_local_callers
from shared.http.errors import Unauthenticated
from shared.http.push_auth import LEEWAY_S, OidcVerifier
from tests.unit.test_push_auth import (  # noqa: F401
    AUDIENCE,
    TASKS_SA,
    FakeCertsTransport,
    claims_verifier,
    forwarded,
    signing,
    token,
    verifier,
)

Signing = tuple[crypt.RSASigner, str]


class GoogleAuthClock:
    """The time google-auth checks `iat` and `exp` against, set by the test."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = int(time.time())
        monkeypatch.setattr(_helpers, "utcnow", self._utcnow)

    def _utcnow(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.now, dt.UTC).replace(tzinfo=None)


@pytest.fixture
def google_clock(monkeypatch: pytest.MonkeyPatch) -> GoogleAuthClock:
    return GoogleAuthClock(monkeypatch)


def test_an_expiry_is_tolerated_for_the_leeway_and_no_longer(
    signing: Signing,  # noqa: F811
    google_clock: GoogleAuthClock,
) -> None:
    expiry = google_clock.now
    expired = token(signing[0], iat=expiry - 600, exp=expiry)
    google_clock.now = expiry + LEEWAY_S
    verifier(signing).verify(expired)
    google_clock.now = expiry + LEEWAY_S + 1
    with pytest.raises(Unauthenticated) as caught:
        verifier(signing).verify(expired)
    assert caught.value.detail.startswith("invalid ID token: Token expired")


def test_an_issue_time_ahead_is_tolerated_for_the_leeway_and_no_longer(
    signing: Signing,  # noqa: F811
    google_clock: GoogleAuthClock,
) -> None:
    now = google_clock.now
    verifier(signing).verify(token(signing[0], iat=now + LEEWAY_S, exp=now + 600))
    with pytest.raises(Unauthenticated) as caught:
        verifier(signing).verify(token(signing[0], iat=now + LEEWAY_S + 1, exp=now + 600))
    assert caught.value.detail.startswith("invalid ID token: Token used too early")


def test_a_token_from_another_issuer_is_refused_as_not_google_s(
    signing: Signing,  # noqa: F811
) -> None:
    with pytest.raises(Unauthenticated) as caught:
        verifier(signing).verify(token(signing[0], iss="https://evil.example"))
    assert caught.value.detail == "ID token was not issued by Google"


def test_a_token_stripped_by_cloud_run_is_refused_naming_the_setting() -> None:
    full = OidcVerifier(AUDIENCE, frozenset({TASKS_SA}), transport=FakeCertsTransport("k1", ""))
    with pytest.raises(Unauthenticated) as caught:
        full.verify(minted_by_local_callers(AUDIENCE, TASKS_SA))
    assert caught.value.detail == (
        "the ID token's signature was removed by Cloud Run: behind Cloud Run IAM "
        "set GRADEQ_PUSH_VERIFY_SIGNATURE=false"
    )


# --- a token forwarded by Cloud Run (its signature stripped at the front) --------------


@pytest.mark.parametrize("token", ["not-a-jwt", "a.b", "a.b.c.d"])
def test_a_forwarded_token_not_in_three_parts_is_refused_as_malformed(token: str) -> None:
    with pytest.raises(Unauthenticated) as caught:
        claims_verifier().verify(token)
    assert caught.value.detail == "malformed ID token"


def test_a_token_that_kept_its_signature_is_refused_as_not_forwarded() -> None:
    header, payload, _ = forwarded().split(".")
    with pytest.raises(Unauthenticated) as caught:
        claims_verifier().verify(f"{header}.{payload}.c2lnbmF0dXJl")
    assert caught.value.detail == "ID token was not forwarded by Cloud Run (it is still signed)"


def test_a_forwarded_token_whose_claims_fail_is_refused_naming_the_check() -> None:
    now = int(time.time())
    with pytest.raises(Unauthenticated) as caught:
        claims_verifier().verify(forwarded(iat=now - 7200, exp=now - 3600))
    assert caught.value.detail == "invalid ID token: Signature has expired"
