"""Web frontends: Firebase Authentication / Identity Platform ID tokens.

Tokens are verified with google-auth (`verify_firebase_token`: signature against Google's
published certificates, issuer and audience = the Firebase project, expiry). The
certificates are fetched once and kept for their Cache-Control max-age. A token maps to
a client by a custom claim (set with the Admin SDK), or else by its Identity Platform
tenant. Anonymous sign-ins and unverified email addresses are refused unless the settings
allow them. A role claim makes a user a teacher (or admin) or a reviewer of their school;
anyone else is a student (see docs/auth.md and shared/domain/authorization.py).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from google.auth import exceptions as auth_exceptions
from google.auth.transport import requests as google_requests
from google.oauth2 import id_token

from services.intake.auth.firebase_revocation import AccountLookup
from shared.domain.authorization import Principal, Role
from shared.domain.client_ids import check_client_id
from shared.domain.errors import DependencyUnavailable, GradeqError
from shared.http.errors import Unauthenticated

#: Accepted clock skew between Google's token issuer and this instance.
CLOCK_SKEW_S = 10
#: A Firebase ID token's `iss` is this followed by the project id (tenants' tokens too).
FIREBASE_ISSUER_PREFIX = "https://securetoken.google.com/"
#: Sign-in providers that verify the user themselves: no verified email is needed.
_SELF_VERIFYING = frozenset({"phone", "custom"})
_MAX_AGE = re.compile(r"max-age=(\d+)")


class NoClientForUser(GradeqError):
    slug = "no-client-for-user"
    title = "The signed-in user belongs to no client"
    status = 403


class SignInNotAccepted(GradeqError):
    slug = "sign-in-not-accepted"
    title = "This kind of sign-in may not call the API"
    status = 403


class CachingRequest:
    """A google-auth transport that keeps successful GET answers for their max-age."""

    def __init__(
        self,
        inner: Callable[..., Any] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        default_ttl_s: float = 3600.0,
    ) -> None:
        self._inner = inner or google_requests.Request()
        self._monotonic = monotonic
        self._default_ttl_s = default_ttl_s
        self._cache: dict[str, tuple[float, Any]] = {}
        self._lock = threading.Lock()
        self.fetches = 0

    def __call__(self, url: str, method: str = "GET", **kwargs: Any) -> Any:
        if method != "GET":
            return self._inner(url, method=method, **kwargs)
        now = self._monotonic()
        with self._lock:
            cached = self._cache.get(url)
            if cached is not None and cached[0] > now:
                return cached[1]
        response = self._inner(url, method=method, **kwargs)
        self.fetches += 1
        if response.status == 200:
            control = str((response.headers or {}).get("cache-control", ""))
            found = _MAX_AGE.search(control)
            ttl = float(found.group(1)) if found else self._default_ttl_s
            with self._lock:
                self._cache[url] = (now + ttl, response)
        return response


@dataclass(frozen=True)
class SignInPolicy:
    """Which signed-in users may call, and which of them see their whole client."""

    #: The custom claim (a string or a list) holding the user's roles.
    role_claim: str = "gradeq_role"
    #: Roles that see and manage every job of their client; everyone else only their own.
    client_wide_roles: frozenset[str] = frozenset({"teacher", "admin"})
    #: Roles that may review the client's held grades (docs/review.md).
    reviewer_roles: frozenset[str] = frozenset({"reviewer", "teacher"})
    allow_anonymous: bool = False
    allow_unverified: bool = False


def _roles(value: Any) -> set[str]:
    if isinstance(value, str):
        return {value}
    if isinstance(value, list | tuple):
        return {v for v in value if isinstance(v, str)}
    return set()


class FirebaseAuthenticator:
    """Map a Firebase ID token to the client (or the user within it) it speaks for.

    The scope is the server's decision: a user works in a scope of their own unless a
    custom claim (set with the Admin SDK) gives them a client-wide role.
    """

    def __init__(
        self,
        project_id: str,
        client_claim: str,
        tenant_clients: dict[str, str],
        request: Callable[..., Any] | None = None,
        policy: SignInPolicy | None = None,
        accounts: AccountLookup | None = None,
    ) -> None:
        if not project_id:
            raise ValueError("a Firebase project id is needed to check the token's audience")
        self._project_id = project_id
        self._issuer = FIREBASE_ISSUER_PREFIX + project_id
        self._client_claim = client_claim
        self._policy = policy or SignInPolicy()
        for client in tenant_clients.values():
            check_client_id(client)
        self._tenant_clients = tenant_clients
        self._request = request or CachingRequest()
        self._accounts = accounts

    def principal_for(self, token: str, only_own: bool = False) -> Principal:
        """The signed-in caller: their school, their user id, and the role the claim gives.

        A client-wide role (`teacher`, `admin`) is a teacher, a reviewer role a reviewer,
        anyone else a student. `only_own` narrows staff's lists to their own objects.
        """
        claims = self._verified_claims(token)
        firebase = claims.get("firebase")
        firebase = firebase if isinstance(firebase, dict) else {}
        tenant = firebase.get("tenant") if isinstance(firebase.get("tenant"), str) else None
        self._check_sign_in(claims, firebase)
        client = self._client_of(claims, tenant)
        if self._accounts is not None:
            _check_not_revoked(self._accounts, claims, tenant)
        roles = _roles(claims.get(self._policy.role_claim))
        if roles & self._policy.client_wide_roles:
            role = Role.TEACHER
        elif roles & self._policy.reviewer_roles:
            role = Role.REVIEWER
        else:
            role = Role.STUDENT
        return Principal(client, str(claims["sub"]), role, only_own and role is not Role.STUDENT)

    def _verified_claims(self, token: str) -> dict[str, Any]:
        try:
            claims: dict[str, Any] = id_token.verify_firebase_token(  # type: ignore[no-untyped-call]
                token, self._request, audience=self._project_id, clock_skew_in_seconds=CLOCK_SKEW_S
            )
        except auth_exceptions.TransportError as exc:
            raise DependencyUnavailable("Google's token certificates are unreachable") from exc
        except (ValueError, auth_exceptions.GoogleAuthError) as exc:
            # The reason (expired, wrong audience, bad signature) stays out of the answer.
            raise Unauthenticated("invalid, expired or foreign ID token") from exc
        # Checked here as well as by google-auth, so no library version decides it: a
        # tenant's token has the project's issuer too and names its tenant in a claim.
        if claims.get("iss") != self._issuer:
            raise Unauthenticated("invalid, expired or foreign ID token")
        if not isinstance(claims.get("sub"), str) or not claims["sub"]:
            raise Unauthenticated("invalid, expired or foreign ID token")
        return claims

    def _check_sign_in(self, claims: dict[str, Any], firebase: dict[str, Any]) -> None:
        provider = firebase.get("sign_in_provider")
        if provider == "anonymous":
            if not self._policy.allow_anonymous:
                raise SignInNotAccepted("anonymous sign-ins are not accepted")
            return
        # A phone number is verified by its code; a custom token by the project's server.
        verified = claims.get("email_verified") is True or provider in _SELF_VERIFYING
        if not verified and not self._policy.allow_unverified:
            raise SignInNotAccepted("sign in with a verified email address")

    def _client_of(self, claims: dict[str, Any], tenant: str | None) -> str:
        client = claims.get(self._client_claim)
        if not isinstance(client, str) or not client:
            client = self._tenant_clients.get(tenant) if tenant else None
        if not client:
            raise NoClientForUser(
                f"the token has no '{self._client_claim}' claim and no known tenant"
            )
        try:
            return check_client_id(client)
        except ValueError as exc:
            raise NoClientForUser(f"the token's client is not a client id: {exc}") from exc


def _check_not_revoked(accounts: AccountLookup, claims: dict[str, Any], tenant: str | None) -> None:
    """Refuse a sign-in older than its account's `validSince`, or of no usable account."""
    account = accounts.account(claims["sub"], tenant)
    signed_in = claims.get("auth_time", claims.get("iat"))
    if account is None or account.disabled:
        raise Unauthenticated("the signed-in account is disabled or deleted")
    if not isinstance(signed_in, int | float) or signed_in < account.valid_since_s:
        raise Unauthenticated("the sign-in was revoked; sign in again")
