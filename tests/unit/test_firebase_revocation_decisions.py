"""The account lookup's decisions: the URL it posts to, the deadline it gives the call,
what an account without `validSince` or `disabled` means, what a failed lookup tells,
and the credentials and scope of its default session. No request leaves the process."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import google.auth
import pytest
import requests
from google.auth.credentials import AnonymousCredentials
from google.auth.transport.requests import AuthorizedSession

from services.intake.auth import firebase_revocation
from services.intake.auth.firebase_revocation import Account, IdentityToolkitLookup
from shared.domain.errors import DependencyUnavailable


class Toolkit(requests.adapters.BaseAdapter):
    """Answers every request with one status and JSON body, recording what was sent."""

    def __init__(self, status: int = 200, body: Any = None) -> None:
        super().__init__()
        self.status = status
        self.body = {"users": []} if body is None else body
        self.sent: list[tuple[str | None, Any, Any]] = []

    def send(
        self,
        request: requests.PreparedRequest,
        stream: bool = False,
        timeout: float | tuple[float, float] | tuple[float, None] | None = None,
        verify: bool | str = True,
        cert: bytes | str | tuple[bytes | str, bytes | str] | None = None,
        proxies: Mapping[str, str] | None = None,
    ) -> requests.Response:
        self.sent.append((request.url, json.loads(request.body or b"null"), timeout))
        response = requests.Response()
        response.status_code = self.status
        raw = self.body if isinstance(self.body, bytes) else json.dumps(self.body).encode()
        response._content = raw
        response.request = request
        return response

    def close(self) -> None:
        return None


def _session(toolkit: Toolkit) -> requests.Session:
    session = requests.Session()
    session.mount("https://", toolkit)
    return session


def _lookup(toolkit: Toolkit, **kw: Any) -> IdentityToolkitLookup:
    return IdentityToolkitLookup("proj-1", session=lambda: _session(toolkit), **kw)


def test_the_lookup_posts_to_the_project_under_the_base_url_with_its_deadline() -> None:
    toolkit = Toolkit()
    assert _lookup(toolkit).account("u1", None) is None
    assert (
        _lookup(toolkit, base_url="https://proxy.example/PREFIX/", timeout_s=1.5).account(
            "u2", "tenant-b"
        )
        is None
    )
    assert toolkit.sent == [
        (
            "https://identitytoolkit.googleapis.com/v1/projects/proj-1/accounts:lookup",
            {"localId": ["u1"]},
            5.0,
        ),
        (
            "https://proxy.example/PREFIX/v1/projects/proj-1/accounts:lookup",
            {"localId": ["u2"], "tenantId": "tenant-b"},
            1.5,
        ),
    ]


def test_an_account_without_valid_since_or_disabled_is_valid_since_ever_and_enabled() -> None:
    toolkit = Toolkit(body={"users": [{"localId": "u1"}]})
    assert _lookup(toolkit).account("u1", None) == Account(valid_since_s=0, disabled=False)


def test_a_failed_lookup_is_a_dependency_unavailable_that_names_the_lookup() -> None:
    for toolkit in (Toolkit(status=500), Toolkit(body=b"<html>gateway</html>")):
        with pytest.raises(DependencyUnavailable) as caught:
            _lookup(toolkit).account("u1", None)
        assert caught.value.detail == "the sign-in's account could not be looked up"


@pytest.mark.parametrize(
    "body",
    [["not", "an", "object"], {"users": "u1"}, {"users": [{"validSince": "soon"}]}],
)
def test_an_answer_of_an_unexpected_shape_is_a_dependency_unavailable(body: Any) -> None:
    with pytest.raises(DependencyUnavailable):
        _lookup(Toolkit(body=body)).account("u1", None)


def test_the_default_session_carries_the_service_s_own_credentials_for_cloud_platform(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    credentials = AnonymousCredentials()  # type: ignore[no-untyped-call]
    asked: list[Any] = []

    def default(scopes: Any = None, **kw: Any) -> tuple[AnonymousCredentials, str]:
        asked.append(scopes)
        return credentials, "proj-1"

    monkeypatch.setattr(google.auth, "default", default)
    session = firebase_revocation._authorized_session()
    assert isinstance(session, AuthorizedSession)
    assert session.credentials is credentials
    assert asked == [["https://www.googleapis.com/auth/cloud-platform"]]
