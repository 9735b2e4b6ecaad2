"""Authenticate pushes from Cloud Tasks and Pub/Sub before a handler runs.

In production both sign an OIDC ID token for a service account; the app verifies its
signature, audience and the account's email. Locally the dispatcher and the bus send a
shared bearer token instead.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable
from typing import Any, Protocol

from flask import request

from shared.config.settings import PushAuth, Settings
from shared.http.errors import Unauthenticated

log = logging.getLogger(__name__)


class PushVerifier(Protocol):
    """Checks the bearer token of an incoming push; raises Unauthenticated."""

    def verify(self, token: str) -> None: ...


class SharedTokenVerifier:
    """Compare the bearer token with the locally shared secret in constant time."""

    def __init__(self, secret: str) -> None:
        if not secret:
            raise ValueError("GRADEQ_PUSH_TOKEN must be set when GRADEQ_PUSH_AUTH=shared-token")
        self._secret = secret.encode()

    def verify(self, token: str) -> None:
        if not hmac.compare_digest(token.encode(), self._secret):
            raise Unauthenticated("push token rejected")


class OidcVerifier:
    """Verify a Google-signed ID token: signature, audience, issuer, allowed email."""

    def __init__(
        self, audience: str, allowed_emails: frozenset[str], transport: Any | None = None
    ) -> None:
        if not audience or not allowed_emails:
            raise ValueError(
                "GRADEQ_PUSH_AUDIENCE and GRADEQ_PUSH_SERVICE_ACCOUNTS are required for oidc"
            )
        from google.auth.transport import requests as google_requests

        self._audience = audience
        self._allowed = allowed_emails
        # The transport fetches Google's signing certificates for each verification.
        self._request = transport or google_requests.Request()

    def verify(self, token: str) -> None:
        from google.auth.exceptions import GoogleAuthError
        from google.oauth2 import id_token

        try:
            claims = id_token.verify_oauth2_token(  # type: ignore[no-untyped-call]
                token, self._request, audience=self._audience
            )
        except (ValueError, GoogleAuthError) as exc:
            raise Unauthenticated(f"invalid ID token: {exc}") from exc
        if not claims.get("email_verified") or claims.get("email") not in self._allowed:
            raise Unauthenticated("ID token is not from an allowed service account")


class EmulatorPushVerifier:
    """Accept any push: the Pub/Sub emulator sends none (settings allow it only there)."""

    def verify(self, token: str) -> None:
        return None


def build_verifier(settings: Settings) -> PushVerifier:
    """Choose the verifier the settings ask for."""
    if settings.push_auth is PushAuth.NONE:
        log.warning("push authentication is off: only acceptable against the emulators")
        return EmulatorPushVerifier()
    if settings.push_auth is PushAuth.OIDC:
        emails = frozenset(e.strip() for e in settings.push_service_accounts.split(",") if e)
        return OidcVerifier(settings.push_audience, emails)
    return SharedTokenVerifier(settings.push_token.get_secret_value())


def require_push_token(verifier: PushVerifier) -> Callable[[], None]:
    """Return a before_request hook that rejects pushes without a valid bearer token."""

    def _check() -> None:
        if isinstance(verifier, EmulatorPushVerifier):
            return
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise Unauthenticated("a bearer token is required")
        verifier.verify(token)

    return _check
