"""The Firebase authenticator's decisions about a token itself: what an unreachable
certificate endpoint, a refused token, a foreign issuer or a missing subject are told, that
a project id is required, how a malformed `firebase` claim or tenant is read, that a caller
is not narrowed to their own objects unless asked, and how long certificates without a
max-age are kept by default."""

from __future__ import annotations

import time
from typing import Any

import pytest

from services.intake.auth.firebase import CachingRequest, FirebaseAuthenticator
from services.intake.auth.firebase_revocation import Account
from shared.domain.authorization import Principal, Role
from shared.domain.errors import DependencyUnavailable
from shared.http.errors import Unauthenticated
from tests.unit.test_firebase_certs_decisions import URL, Answers, Clock, ok
from tests.unit.test_intake_firebase_auth import (
    PROJECT,
    CertResponse,
    FakeAccounts,
    FakeCertEndpoint,
    audience_only,  # noqa: F401
    token,
)

REFUSED = "invalid, expired or foreign ID token"


def _authenticator(accounts: FakeAccounts | None = None) -> FirebaseAuthenticator:
    return FirebaseAuthenticator(
        PROJECT, "gradeq_client", {}, CachingRequest(FakeCertEndpoint()), accounts=accounts
    )


def test_without_a_max_age_certificates_are_kept_for_an_hour_by_default() -> None:
    first, second = ok({}), ok({})
    clock = Clock()
    request = CachingRequest(Answers([first, second]), monotonic=clock)
    assert request(URL) is first
    clock.now += 3599.9
    assert request(URL) is first
    clock.now += 0.1  # exactly an hour later: expired
    assert request(URL) is second
    assert request.fetches == 2


def test_a_project_id_is_required() -> None:
    with pytest.raises(ValueError) as caught:
        FirebaseAuthenticator("", "gradeq_client", {})
    assert str(caught.value) == "a Firebase project id is needed to check the token's audience"


def test_unreachable_certificates_are_a_dependency_failure() -> None:
    down = FirebaseAuthenticator(
        PROJECT, "gradeq_client", {}, CachingRequest(Answers([CertResponse(503, b"")]))
    )
    with pytest.raises(DependencyUnavailable) as caught:
        down.principal_for(token())
    assert caught.value.detail == "Google's token certificates are unreachable"


def test_a_token_google_auth_refuses_is_told_only_that_it_is_refused() -> None:
    now = int(time.time())
    expired = token(iat=now - 7200, auth_time=now - 7200, exp=now - 3600)
    with pytest.raises(Unauthenticated) as caught:
        _authenticator().principal_for(expired)
    assert caught.value.detail == REFUSED


@pytest.mark.usefixtures("audience_only")
def test_a_foreign_issuer_is_refused_even_when_google_auth_does_not_check_it() -> None:
    with pytest.raises(Unauthenticated) as caught:
        _authenticator().principal_for(token(iss="https://accounts.google.com"))
    assert caught.value.detail == REFUSED


@pytest.mark.usefixtures("audience_only")
@pytest.mark.parametrize("sub", ["", 123, None])
def test_a_token_without_a_string_subject_is_refused(sub: Any) -> None:
    with pytest.raises(Unauthenticated) as caught:
        _authenticator().principal_for(token(sub=sub))
    assert caught.value.detail == REFUSED


@pytest.mark.parametrize("firebase", [None, "password", ["tenant-b"]])
def test_a_firebase_claim_that_is_not_an_object_is_read_as_empty(firebase: Any) -> None:
    # No provider then, so the verified email decides.
    principal = _authenticator().principal_for(token(firebase=firebase))
    assert principal == Principal("school-a", "user-123", Role.STUDENT, False)


@pytest.mark.parametrize("tenant", [123, ["tenant-b"], {"id": "tenant-b"}])
def test_a_tenant_that_is_not_a_string_is_no_tenant(tenant: Any) -> None:
    accounts = FakeAccounts({"user-123": Account(valid_since_s=0, disabled=False)})
    firebase = {"sign_in_provider": "password", "tenant": tenant}
    principal = _authenticator(accounts).principal_for(token(firebase=firebase))
    assert principal == Principal("school-a", "user-123", Role.STUDENT, False)
    assert accounts.asked == [("user-123", None)]


def test_a_teacher_sees_the_whole_client_unless_asked_to_narrow() -> None:
    firebase = _authenticator()
    teacher = token(sub="teacher-1", gradeq_role="teacher")
    assert firebase.principal_for(teacher) == Principal("school-a", "teacher-1", Role.TEACHER)
    assert firebase.principal_for(teacher).only_own is False
    assert firebase.principal_for(teacher, only_own=True).only_own is True
