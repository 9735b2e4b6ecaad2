"""Whether a Firebase sign-in is still good: Identity Toolkit's `accounts:lookup`.

An ID token stays valid for its hour even after the user's sessions are revoked (a
password change, `revokeRefreshTokens`) or the account is disabled. Where
GRADEQ_FIREBASE_CHECK_REVOKED asks for it, the intake looks the account up: a token
whose sign-in (`auth_time`) is older than the account's `validSince`, or of a disabled or
deleted account, is refused. That is one API call per request, as with the Admin SDK's
`check_revoked`; the call needs `firebaseauth.users.get` on the project.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import requests

from shared.domain.errors import DependencyUnavailable

IDENTITY_TOOLKIT_URL = "https://identitytoolkit.googleapis.com"
SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)


@dataclass(frozen=True)
class Account:
    """What revocation needs of a Firebase account."""

    valid_since_s: int  # sign-ins before this moment (Unix seconds) are revoked
    disabled: bool


class AccountLookup(Protocol):
    """Finds a Firebase account by uid (within a tenant); None when there is none."""

    def account(self, uid: str, tenant: str | None) -> Account | None: ...


def _authorized_session() -> requests.Session:
    """A session with the service's own credentials (built on first use, not at import)."""
    import google.auth
    from google.auth.transport.requests import AuthorizedSession

    credentials, _ = google.auth.default(scopes=list(SCOPES))
    return AuthorizedSession(credentials)  # type: ignore[no-untyped-call]


class IdentityToolkitLookup:
    """Look accounts up with the Identity Toolkit REST API (what the Admin SDK calls)."""

    def __init__(
        self,
        project_id: str,
        session: Callable[[], requests.Session] = _authorized_session,
        base_url: str = IDENTITY_TOOLKIT_URL,
        timeout_s: float = 5.0,
    ) -> None:
        self._url = f"{base_url.rstrip('/')}/v1/projects/{project_id}/accounts:lookup"
        self._make_session = session
        self._session: requests.Session | None = None
        self._lock = threading.Lock()
        self._timeout_s = timeout_s

    def _client(self) -> requests.Session:
        with self._lock:
            if self._session is None:
                self._session = self._make_session()
            return self._session

    def account(self, uid: str, tenant: str | None) -> Account | None:
        body: dict[str, Any] = {"localId": [uid]}
        if tenant:
            body["tenantId"] = tenant
        try:
            response = self._client().post(self._url, json=body, timeout=self._timeout_s)
            response.raise_for_status()
            return _account_of(response.json())
        except (requests.RequestException, ValueError, TypeError, AttributeError) as exc:
            # A 200 of an unexpected shape is the lookup failing, not the sign-in.
            raise DependencyUnavailable("the sign-in's account could not be looked up") from exc


def _account_of(answer: Any) -> Account | None:
    users = answer.get("users") or []
    if not isinstance(users, list):
        raise TypeError  # caught by `account`: the lookup failed
    if not users:
        return None
    user = users[0]
    return Account(int(user.get("validSince") or 0), bool(user.get("disabled", False)))
