"""The shared-token push check's decisions (`GRADEQ_PUSH_AUTH=shared-token`, local use):
which header it reads, which scheme it takes, what each refusal says; and the refusal of
claims-only checking outside Cloud Run, word for word."""

from __future__ import annotations

import pytest
from flask import Flask

from shared.http.errors import Unauthenticated
from shared.http.push_auth import (
    SERVERLESS_AUTHORIZATION,
    SharedTokenVerifier,
    build_verifier,
    require_push_token,
)
from tests.unit.test_push_auth import oidc_settings

SECRET = "s3cret"


def refusal(headers: dict[str, str]) -> str | None:
    """The detail of the shared-token check's refusal of a push with `headers`, or None."""
    check = require_push_token(SharedTokenVerifier(SECRET))
    with Flask(__name__).test_request_context("/tasks/grade", method="POST", headers=headers):
        try:
            check()
        except Unauthenticated as refused:
            return refused.detail
    return None


def test_the_right_bearer_token_passes() -> None:
    assert refusal({"Authorization": f"Bearer {SECRET}"}) is None
    assert refusal({"Authorization": f"bearer {SECRET}"}) is None


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": ""},
        {"Authorization": "Bearer"},
        {"Authorization": f"Basic {SECRET}"},
        {"Authorization": SECRET},
    ],
    ids=["none", "empty", "no-token", "other-scheme", "no-scheme"],
)
def test_a_push_without_a_bearer_token_is_refused_as_such(headers: dict[str, str]) -> None:
    assert refusal(headers) == "a bearer token is required"


def test_a_wrong_token_is_rejected_and_the_token_is_all_after_the_first_space() -> None:
    assert refusal({"Authorization": "Bearer nope"}) == "push token rejected"
    # "Bearer" and then the rest: a token with a space in it is compared whole.
    assert refusal({"Authorization": f"Bearer {SECRET} {SECRET}"}) == "push token rejected"


def test_the_shared_token_is_read_from_authorization_only() -> None:
    # Cloud Run's validated header belongs to the OIDC modes; here it is not a credential.
    headers = {SERVERLESS_AUTHORIZATION: f"Bearer {SECRET}"}
    assert refusal(headers) == "a bearer token is required"


def test_a_shared_token_verifier_needs_its_secret() -> None:
    with pytest.raises(ValueError) as refused:
        SharedTokenVerifier("")
    assert str(refused.value) == (
        "GRADEQ_PUSH_TOKEN must be set when GRADEQ_PUSH_AUTH=shared-token"
    )


def test_claims_only_checking_outside_cloud_run_is_refused_naming_both_ways_out() -> None:
    with pytest.raises(ValueError) as refused:
        build_verifier(oidc_settings(push_allow_claims_outside_cloud_run=False), {})
    assert str(refused.value) == (
        "claims-only push authentication (GRADEQ_PUSH_VERIFY_SIGNATURE=false) relies on "
        "Cloud Run's front, and this is not Cloud Run (no K_SERVICE): verify signatures, "
        "or set GRADEQ_PUSH_ALLOW_CLAIMS_OUTSIDE_CLOUD_RUN behind a stand-in front"
    )
