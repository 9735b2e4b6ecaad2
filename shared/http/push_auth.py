"""Authenticate pushes from Cloud Tasks, Cloud Scheduler and Pub/Sub before a handler runs.

In production the worker and the subscribers are Cloud Run services that require
authentication. Cloud Run itself verifies the caller's Google-signed ID token (signature,
audience, the caller's `run.invoker` role) and forwards it to the container with the
signature replaced by the literal `SIGNATURE_REMOVED_BY_GOOGLE`. So by default
(`GRADEQ_PUSH_AUTH=oidc`, `GRADEQ_PUSH_VERIFY_SIGNATURE=false`) the app reads the claims of
that forwarded token without verifying a signature that is no longer there, and checks
them: audience, issuer, expiry, and a verified email among the allowed service accounts.
The pushers reuse a token for many requests: one accepted is remembered until it expires.
A token that still carries a signature did not pass through Cloud Run's front (Cloud Run
always strips it), so it is refused in this mode.

Which header carries the validated token matters. Cloud Run validates
`X-Serverless-Authorization` when a request has it and then passes `Authorization` on
untouched, unvalidated: anyone allowed to invoke the service could put a hand-written
"forwarded" token for the tasks account there. So the identity is read from
`X-Serverless-Authorization` when present, else from `Authorization`, and a request that
carries both is refused (none of Google's pushers sends both). Claims-only mode trusts a
front that only Cloud Run provides: outside Cloud Run (no `K_SERVICE` in the environment)
a service refuses to start in it unless GRADEQ_PUSH_ALLOW_CLAIMS_OUTSIDE_CLOUD_RUN says
a stand-in front is there (the local stack, tests).

A service deployed without IAM in front (e.g. behind a load balancer) sets
`GRADEQ_PUSH_VERIFY_SIGNATURE=true`: the app then verifies the signature against Google's
certificates (cached as their Cache-Control header allows) and checks the same claims.

Locally the dispatcher and the bus either send tokens shaped like Cloud Run's forwarded
ones (see `localcloud.cloudrun`) or a shared bearer token (`shared-token`).
"""

from __future__ import annotations

import hmac
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import jwt
from flask import request

from shared.config.settings import PushAuth, Settings
from shared.http.errors import Unauthenticated

log = logging.getLogger(__name__)

#: What Cloud Run puts in place of the signature of the ID token it forwards.
FORWARDED_SIGNATURE = "SIGNATURE_REMOVED_BY_GOOGLE"
#: The `iss` of Google-issued ID tokens (both forms occur).
GOOGLE_ISSUERS = frozenset({"https://accounts.google.com", "accounts.google.com"})
#: The header Cloud Run validates instead of `Authorization` when a request carries it.
SERVERLESS_AUTHORIZATION = "X-Serverless-Authorization"
#: Set by Cloud Run in every container it runs.
CLOUD_RUN_MARKER = "K_SERVICE"
#: Clock skew tolerated on `exp` and `iat`, in seconds.
LEEWAY_S = 10
GOOGLE_CERTS_URL = "https://www.googleapis.com/oauth2/v1/certs"
#: Accepted tokens a verifier remembers (each pusher identity reuses one at a time).
REMEMBERED_TOKENS = 64


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


def _check_caller(claims: Mapping[str, Any], allowed_emails: frozenset[str]) -> None:
    """Accept only a verified email of one of the allowed service accounts."""
    if claims.get("email_verified") is not True:
        raise Unauthenticated("ID token email is not verified")
    if claims.get("email") not in allowed_emails:
        raise Unauthenticated("ID token is not from an allowed service account")


def _require_identity(audience: str, allowed_emails: frozenset[str]) -> None:
    if not audience or not allowed_emails:
        raise ValueError(
            "GRADEQ_PUSH_AUDIENCE and GRADEQ_PUSH_SERVICE_ACCOUNTS are required "
            "with GRADEQ_PUSH_AUTH=oidc"
        )


class _AcceptedTokens:
    """Tokens accepted before, each with its expiry: accepted again until then.

    Google's pushers send one ID token with many requests (for up to an hour). Every
    claim checked but the expiry depends on the token's text alone, so the very same
    text, accepted once, stays acceptable until its `exp` (plus the leeway the full check
    allows); past it, the token is checked in full again, and refused there.
    """

    def __init__(self, size: int = REMEMBERED_TOKENS) -> None:
        self._size = size
        self._expiries: OrderedDict[str, float] = OrderedDict()
        self._guard = threading.Lock()

    def accepts(self, token: str) -> bool:
        with self._guard:
            expiry = self._expiries.get(token)
            if expiry is None:
                return False
            if time.time() < expiry + LEEWAY_S:
                return True
            del self._expiries[token]
            return False

    def remember(self, token: str, claims: Mapping[str, Any]) -> None:
        expiry = claims.get("exp")
        if not isinstance(expiry, int | float) or isinstance(expiry, bool):
            return
        with self._guard:
            self._expiries[token] = float(expiry)
            self._expiries.move_to_end(token)
            if len(self._expiries) > self._size:
                self._expiries.popitem(last=False)


class ForwardedTokenVerifier:
    """Check the claims of the ID token Cloud Run forwards after verifying its signature."""

    def __init__(self, audience: str, allowed_emails: frozenset[str]) -> None:
        _require_identity(audience, allowed_emails)
        self._audience = audience
        self._allowed = allowed_emails
        self._accepted = _AcceptedTokens()

    def verify(self, token: str) -> None:
        if self._accepted.accepts(token):
            return
        self._accepted.remember(token, self._checked_claims(token))

    def _checked_claims(self, token: str) -> dict[str, Any]:
        parts = token.split(".")
        if len(parts) != 3:
            raise Unauthenticated("malformed ID token")
        if parts[2] != FORWARDED_SIGNATURE:
            raise Unauthenticated("ID token was not forwarded by Cloud Run (it is still signed)")
        try:
            # PyJWT skips every claim check when the signature is not verified unless
            # each one is switched on, so they are all named here.
            claims = jwt.decode(
                token,
                options={
                    "verify_signature": False,
                    "verify_aud": True,
                    "verify_iss": True,
                    "verify_exp": True,
                    "verify_iat": True,
                    "strict_aud": True,
                    "require": ["iss", "aud", "exp", "iat", "email"],
                },
                audience=self._audience,
                issuer=GOOGLE_ISSUERS,
                leeway=LEEWAY_S,
            )
        except jwt.PyJWTError as exc:
            raise Unauthenticated(f"invalid ID token: {exc}") from exc
        _check_caller(claims, self._allowed)
        return claims


def cached_certs_request() -> Any:
    """A google-auth transport whose HTTP cache keeps Google's certs as long as they allow."""
    import cachecontrol
    import requests
    from google.auth.transport import requests as google_requests

    return google_requests.Request(session=cachecontrol.CacheControl(requests.Session()))


class OidcVerifier:
    """Verify a Google-signed ID token: signature, audience, expiry, issuer, allowed email."""

    def __init__(
        self,
        audience: str,
        allowed_emails: frozenset[str],
        transport: Any | None = None,
        certs_url: str = GOOGLE_CERTS_URL,
    ) -> None:
        _require_identity(audience, allowed_emails)
        self._audience = audience
        self._allowed = allowed_emails
        self._certs_url = certs_url
        self._request = transport or cached_certs_request()

    def verify(self, token: str) -> None:
        from google.auth.exceptions import GoogleAuthError
        from google.oauth2 import id_token

        if token.endswith("." + FORWARDED_SIGNATURE):
            raise Unauthenticated(
                "the ID token's signature was removed by Cloud Run: behind Cloud Run IAM "
                "set GRADEQ_PUSH_VERIFY_SIGNATURE=false"
            )
        try:
            claims = id_token.verify_token(
                token,
                self._request,
                audience=self._audience,
                certs_url=self._certs_url,
                clock_skew_in_seconds=LEEWAY_S,
            )
        except (ValueError, GoogleAuthError) as exc:
            raise Unauthenticated(f"invalid ID token: {exc}") from exc
        if claims.get("iss") not in GOOGLE_ISSUERS:
            raise Unauthenticated("ID token was not issued by Google")
        _check_caller(claims, self._allowed)


class EmulatorPushVerifier:
    """Accept any push: the Pub/Sub emulator sends none (settings allow it only there)."""

    def verify(self, token: str) -> None:
        return None


def allowed_push_accounts(settings: Settings) -> frozenset[str]:
    """The service accounts of GRADEQ_PUSH_SERVICE_ACCOUNTS."""
    return frozenset(e.strip() for e in settings.push_service_accounts.split(",") if e.strip())


def build_verifier(settings: Settings, environ: Mapping[str, str] | None = None) -> PushVerifier:
    """Choose the verifier the settings ask for; raise ValueError when it lacks settings."""
    environ = os.environ if environ is None else environ
    if settings.push_auth is PushAuth.NONE:
        log.warning("push authentication is off: only acceptable against the emulators")
        return EmulatorPushVerifier()
    if settings.push_auth is PushAuth.OIDC:
        emails = allowed_push_accounts(settings)
        if settings.push_verify_signature:
            return OidcVerifier(settings.push_audience, emails)
        if CLOUD_RUN_MARKER not in environ and not settings.push_allow_claims_outside_cloud_run:
            raise ValueError(
                "claims-only push authentication (GRADEQ_PUSH_VERIFY_SIGNATURE=false) relies on "
                "Cloud Run's front, and this is not Cloud Run (no K_SERVICE): verify signatures, "
                "or set GRADEQ_PUSH_ALLOW_CLAIMS_OUTSIDE_CLOUD_RUN behind a stand-in front"
            )
        return ForwardedTokenVerifier(settings.push_audience, emails)
    return SharedTokenVerifier(settings.push_token.get_secret_value())


def require_push_token(verifier: PushVerifier) -> Callable[[], None]:
    """Return a before_request hook that rejects pushes without a valid bearer token."""

    oidc = isinstance(verifier, ForwardedTokenVerifier | OidcVerifier)

    def _check() -> None:
        if isinstance(verifier, EmulatorPushVerifier):
            return
        try:
            header = _validated_header() if oidc else request.headers.get("Authorization", "")
            scheme, _, token = header.partition(" ")
            if scheme.lower() != "bearer" or not token:
                raise Unauthenticated("a bearer token is required")
            verifier.verify(token)
        except Unauthenticated as exc:
            # A 4xx is not logged as an error; a misconfigured caller must still show up.
            log.warning("push refused: %s", exc.detail, extra={"path": request.path})
            raise

    return _check


def _validated_header() -> str:
    """The authorization header Cloud Run validated: X-Serverless-Authorization first."""
    serverless = request.headers.get(SERVERLESS_AUTHORIZATION)
    if serverless is None:
        return request.headers.get("Authorization", "")
    if "Authorization" in request.headers:
        # Cloud Run passed this one on without looking at it.
        raise Unauthenticated(
            f"Authorization beside {SERVERLESS_AUTHORIZATION} was not validated by Cloud Run"
        )
    return serverless
