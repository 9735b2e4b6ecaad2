"""Claims-only push authentication's decisions: what each refusal of the caller tells,
which header carries the identity Cloud Run validated, and which accepted tokens are
remembered."""

from __future__ import annotations

import time

import pytest
from flask import Flask

from shared.http.errors import Unauthenticated
from shared.http.push_auth import (
    LEEWAY_S,
    SERVERLESS_AUTHORIZATION,
    ForwardedTokenVerifier,
    OidcVerifier,
    _AcceptedTokens,
    _validated_header,
    require_push_token,
)
from tests.unit.test_push_auth import (
    AUDIENCE,
    TASKS_SA,
    CountedDecode,
    _now,
    claims_verifier,
    forwarded,
)

INTRUDER = "intruder@proj.iam.gserviceaccount.com"
PUSH_PATH = "/tasks/grade"


def refusal(token: str) -> str:
    with pytest.raises(Unauthenticated) as caught:
        claims_verifier().verify(token)
    return caught.value.detail


# --- the caller -----------------------------------------------------------------------


@pytest.mark.parametrize("verified", [False, "true", None])
def test_an_email_not_verified_is_refused_as_such(verified: object) -> None:
    assert refusal(forwarded(email_verified=verified)) == "ID token email is not verified"


def test_an_email_not_verified_is_refused_before_its_account_is_looked_at() -> None:
    token = forwarded(email=INTRUDER, email_verified=False)
    assert refusal(token) == "ID token email is not verified"


def test_an_account_not_allowed_is_refused_as_such() -> None:
    assert refusal(forwarded(email=INTRUDER)) == ("ID token is not from an allowed service account")
    assert refusal(forwarded(email=AUDIENCE)) == ("ID token is not from an allowed service account")


# --- which header carries the identity ---------------------------------------------------


@pytest.fixture
def app() -> Flask:
    return Flask(__name__)


def test_authorization_beside_the_validated_header_is_refused_naming_both(app: Flask) -> None:
    # Both tokens are good ones for the allowed account: the pair alone is refused.
    headers = {
        SERVERLESS_AUTHORIZATION: f"Bearer {forwarded()}",
        "Authorization": f"Bearer {forwarded()}",
    }
    for read in (require_push_token(claims_verifier()), _validated_header):
        request = app.test_request_context(PUSH_PATH, method="POST", headers=headers)
        with request, pytest.raises(Unauthenticated) as caught:
            read()
        assert caught.value.detail == (
            "Authorization beside X-Serverless-Authorization was not validated by Cloud Run"
        )


def test_the_validated_header_alone_is_read(app: Flask) -> None:
    token = f"Bearer {forwarded()}"
    with app.test_request_context(
        PUSH_PATH, method="POST", headers={SERVERLESS_AUTHORIZATION: token}
    ):
        assert _validated_header() == token
        require_push_token(claims_verifier())()
    with app.test_request_context(PUSH_PATH, method="POST", headers={"Authorization": token}):
        assert _validated_header() == token
        require_push_token(claims_verifier())()


def test_without_either_header_there_is_no_token(app: Flask) -> None:
    with app.test_request_context(PUSH_PATH, method="POST"):
        assert _validated_header() == ""
        with pytest.raises(Unauthenticated) as caught:
            require_push_token(claims_verifier())()
    assert caught.value.detail == "a bearer token is required"


# --- which accepted tokens are remembered ----------------------------------------------


def test_a_token_whose_expiry_is_not_a_number_is_checked_in_full_each_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # PyJWT accepts an `exp` that int() reads; it is not remembered as an expiry.
    decodes = CountedDecode(monkeypatch)
    verifier = claims_verifier()
    token = forwarded(exp=str(_now() + 300))
    for _ in range(3):
        verifier.verify(token)
    assert decodes.calls == 3
    remembered = forwarded(exp=_now() + 300)
    for _ in range(3):
        verifier.verify(remembered)
    assert decodes.calls == 4


def test_a_remembered_token_is_accepted_until_its_expiry_plus_the_leeway() -> None:
    accepted = _AcceptedTokens()
    now = time.time()
    accepted.remember("fresh", {"exp": now + LEEWAY_S / 2})
    accepted.remember("just-expired", {"exp": now - LEEWAY_S / 2})
    accepted.remember("long-expired", {"exp": now - 2 * LEEWAY_S})
    assert accepted.accepts("fresh") and accepted.accepts("just-expired")
    assert not accepted.accepts("long-expired")
    assert not accepted.accepts("never-seen")


# --- the settings the verifiers need --------------------------------------------------


@pytest.mark.parametrize(
    ("audience", "accounts"),
    [("", frozenset({TASKS_SA})), (AUDIENCE, frozenset()), ("", frozenset())],
)
def test_a_verifier_without_its_audience_or_accounts_names_both_settings(
    audience: str, accounts: frozenset[str]
) -> None:
    for verifier in (ForwardedTokenVerifier, OidcVerifier):
        with pytest.raises(ValueError) as caught:
            verifier(audience, accounts)
        assert str(caught.value) == (
            "GRADEQ_PUSH_AUDIENCE and GRADEQ_PUSH_SERVICE_ACCOUNTS are required "
            "with GRADEQ_PUSH_AUTH=oidc"
        )
