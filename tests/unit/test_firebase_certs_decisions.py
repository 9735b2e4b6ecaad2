"""The Firebase authenticator's own decisions: how long Google's certificates are kept
(their max-age), what passes through uncached, and what a refused sign-in or a user of no
school is told."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from services.intake.auth.firebase import (
    CachingRequest,
    FirebaseAuthenticator,
    NoClientForUser,
    SignInNotAccepted,
)
from tests.unit.test_intake_firebase_auth import PROJECT, CertResponse, FakeCertEndpoint, token

URL = "https://www.googleapis.com/robot/v1/metadata/x509/securetoken@system.gserviceaccount.com"


@dataclass
class Answers:
    """A transport answering each call with the next response; records what it was asked."""

    responses: list[CertResponse]
    asked: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def __call__(self, url: str, **kwargs: Any) -> CertResponse:
        self.asked.append((url, kwargs))
        return self.responses[min(len(self.asked), len(self.responses)) - 1]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def ok(headers: dict[str, str] | None) -> CertResponse:
    response = CertResponse(200, b"{}")
    response.headers = headers  # type: ignore[assignment]
    return response


def test_a_get_is_kept_for_its_max_age_and_fetched_again_at_its_end() -> None:
    first, second = ok({"cache-control": "public, max-age=60"}), ok({})
    inner, clock = Answers([first, second]), Clock()
    request = CachingRequest(inner, monotonic=clock)
    assert request(URL, timeout=5) is first  # GET by default
    clock.now += 59.9
    assert request(URL, timeout=5) is first
    assert (request.fetches, inner.asked) == (1, [(URL, {"method": "GET", "timeout": 5})])
    clock.now += 0.1  # exactly max-age later: expired
    assert request(URL, method="GET", timeout=5) is second
    assert request.fetches == 2 and inner.asked[-1] == (URL, {"method": "GET", "timeout": 5})


@pytest.mark.parametrize("headers", [{}, None, {"cache-control": "no-transform"}])
def test_without_a_max_age_a_get_is_kept_for_the_default_time(
    headers: dict[str, str] | None,
) -> None:
    inner, clock = Answers([ok(headers), ok({})]), Clock()
    request = CachingRequest(inner, monotonic=clock, default_ttl_s=120.0)
    kept = request(URL)
    clock.now += 119.0
    assert request(URL) is kept
    clock.now += 1.0
    assert request(URL) is not kept and request.fetches == 2


def test_a_failed_get_is_not_kept() -> None:
    failed = CertResponse(503, b"", {"cache-control": "max-age=600"})
    inner = Answers([failed, ok({})])
    request = CachingRequest(inner, monotonic=Clock())
    assert request(URL) is failed
    assert request(URL) is not failed and request.fetches == 2


def test_another_method_passes_through_every_time_uncounted() -> None:
    inner = Answers([ok({"cache-control": "max-age=600"})])
    request = CachingRequest(inner, monotonic=Clock())
    request(URL, method="POST", body=b"x")
    request(URL, method="POST", body=b"x")
    assert inner.asked == [(URL, {"method": "POST", "body": b"x"})] * 2
    assert request.fetches == 0


def _authenticator(tenants: dict[str, str] | None = None) -> FirebaseAuthenticator:
    return FirebaseAuthenticator(
        PROJECT, "gradeq_client", tenants or {}, CachingRequest(FakeCertEndpoint())
    )


@pytest.mark.parametrize(
    ("claims", "refused", "said"),
    [
        (
            {"firebase": {"sign_in_provider": "anonymous"}},
            SignInNotAccepted,
            "anonymous sign-ins are not accepted",
        ),
        ({"email_verified": False}, SignInNotAccepted, "sign in with a verified email address"),
        (
            {"gradeq_client": None},
            NoClientForUser,
            "the token has no 'gradeq_client' claim and no known tenant",
        ),
        (
            {"gradeq_client": 123},
            NoClientForUser,
            "the token has no 'gradeq_client' claim and no known tenant",
        ),
        (
            {"gradeq_client": " "},
            NoClientForUser,
            "the token's client is not a client id: a client id must not be blank",
        ),
    ],
)
def test_a_refused_sign_in_is_told_why(
    claims: dict[str, Any], refused: type[Exception], said: str
) -> None:
    with pytest.raises(refused) as caught:
        _authenticator().principal_for(token(**claims))
    assert caught.value.detail == said  # type: ignore[attr-defined]


def test_an_empty_tenant_is_no_tenant() -> None:
    firebase = _authenticator({"": "school-x", "tenant-b": "school-b"})
    no_tenant = token(gradeq_client=None, firebase={"sign_in_provider": "password", "tenant": ""})
    with pytest.raises(NoClientForUser):
        firebase.principal_for(no_tenant)
    tenant_b = token(
        gradeq_client=123, firebase={"sign_in_provider": "password", "tenant": "tenant-b"}
    )
    assert firebase.principal_for(tenant_b).school == "school-b"
