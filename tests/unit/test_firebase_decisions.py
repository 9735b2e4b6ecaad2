"""Firebase sign-in revocation's decisions: which moment of the token counts as the
sign-in, that a sign-in at the very moment of `validSince` is still good, and what each
refusal tells the caller."""

from __future__ import annotations

import time

import pytest

from services.intake.auth.firebase import CachingRequest, FirebaseAuthenticator
from services.intake.auth.firebase_revocation import Account
from shared.domain.authorization import Principal, Role
from shared.http.errors import Unauthenticated
from tests.unit.test_intake_firebase_auth import PROJECT, FakeAccounts, FakeCertEndpoint, token

#: The account's sessions were revoked this long ago: every token below is unexpired.
REVOKED_AGO_S = 600
#: The student the tokens below speak for.
SIGNED_IN = Principal("school-a", "user-123", Role.STUDENT)


def _checking(valid_since_s: int, disabled: bool = False) -> FirebaseAuthenticator:
    accounts = FakeAccounts({"user-123": Account(valid_since_s, disabled)})
    return FirebaseAuthenticator(
        PROJECT, "gradeq_client", {}, CachingRequest(FakeCertEndpoint()), accounts=accounts
    )


def _refusal(firebase: FirebaseAuthenticator, bearer: str) -> str:
    with pytest.raises(Unauthenticated) as caught:
        firebase.principal_for(bearer)
    return caught.value.detail


def test_the_sign_in_time_counts_not_when_the_token_was_refreshed() -> None:
    revoked = int(time.time()) - REVOKED_AGO_S
    firebase = _checking(valid_since_s=revoked)
    # Signed in before the revocation; the token was refreshed after it: still revoked.
    stale = token(auth_time=revoked - 1, iat=revoked + 5)
    assert _refusal(firebase, stale) == "the sign-in was revoked; sign in again"
    assert firebase.principal_for(token(auth_time=revoked + 1, iat=revoked + 5)) == SIGNED_IN


def test_without_a_sign_in_time_the_issue_time_counts() -> None:
    revoked = int(time.time()) - REVOKED_AGO_S
    firebase = _checking(valid_since_s=revoked)
    assert firebase.principal_for(token(auth_time=None, iat=revoked)) == SIGNED_IN
    before = token(auth_time=None, iat=revoked - 1)
    assert _refusal(firebase, before) == "the sign-in was revoked; sign in again"


def test_a_sign_in_at_the_moment_of_valid_since_is_good() -> None:
    revoked = int(time.time()) - REVOKED_AGO_S
    firebase = _checking(valid_since_s=revoked)
    assert firebase.principal_for(token(auth_time=revoked, iat=revoked + 5)) == SIGNED_IN


def test_a_disabled_account_is_refused_as_disabled_or_deleted() -> None:
    firebase = _checking(valid_since_s=0, disabled=True)
    assert _refusal(firebase, token()) == "the signed-in account is disabled or deleted"
