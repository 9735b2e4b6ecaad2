"""Web frontends: Firebase Authentication / Identity Platform ID tokens.

Tokens are verified with google-auth (`verify_firebase_token`: signature against Google's
published certificates, issuer and audience = the Firebase project, expiry). The
certificates are fetched once and kept for their Cache-Control max-age. A token maps to
a client by a custom claim (set with the Admin SDK), or else by its Identity Platform
tenant; a frontend may ask for jobs scoped to the signed-in user as well.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from typing import Any

from google.auth import exceptions as auth_exceptions
from google.auth.transport import requests as google_requests
from google.oauth2 import id_token

from shared.domain.errors import DependencyUnavailable, GradeqError
from shared.http.errors import Unauthenticated

#: Accepted clock skew between Google's token issuer and this instance.
CLOCK_SKEW_S = 10
_MAX_AGE = re.compile(r"max-age=(\d+)")


class NoClientForUser(GradeqError):
    slug = "no-client-for-user"
    title = "The signed-in user belongs to no client"
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


class FirebaseAuthenticator:
    """Map a Firebase ID token to the client (and optionally the user) it speaks for."""

    def __init__(
        self,
        project_id: str,
        client_claim: str,
        tenant_clients: dict[str, str],
        request: Callable[..., Any] | None = None,
    ) -> None:
        if not project_id:
            raise ValueError("a Firebase project id is needed to check the token's audience")
        self._project_id = project_id
        self._client_claim = client_claim
        self._tenant_clients = tenant_clients
        self._request = request or CachingRequest()

    def client_for(self, token: str, per_user: bool) -> str:
        """The client id jobs are scoped to; with `per_user`, to the user within it."""
        try:
            claims: dict[str, Any] = id_token.verify_firebase_token(  # type: ignore[no-untyped-call]
                token, self._request, audience=self._project_id, clock_skew_in_seconds=CLOCK_SKEW_S
            )
        except auth_exceptions.TransportError as exc:
            raise DependencyUnavailable("Google's token certificates are unreachable") from exc
        except (ValueError, auth_exceptions.GoogleAuthError) as exc:
            # The reason (expired, wrong audience, bad signature) stays out of the answer.
            raise Unauthenticated("invalid, expired or foreign ID token") from exc
        client = claims.get(self._client_claim)
        if not isinstance(client, str) or not client:
            tenant = (claims.get("firebase") or {}).get("tenant")
            client = self._tenant_clients.get(tenant) if isinstance(tenant, str) else None
        if not client:
            raise NoClientForUser(
                f"the token has no '{self._client_claim}' claim and no known tenant"
            )
        return f"{client}:user:{claims['sub']}" if per_user else client
