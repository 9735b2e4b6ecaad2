"""Access tokens from a platform's token endpoint: the OAuth 2 client-credentials grant
with a JWT client assertion (RFC 7523) signed by Gradeq's LTI key, as the 1EdTech Security
Framework (section 4.1) describes. A token is kept until shortly before it expires, per
(platform, client id, scopes)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import jwt
import requests

from shared.adapters.lti.errors import LtiBusy, LtiRefused, call
from shared.domain.lti import LtiRegistration
from shared.ports import Clock
from shared.service_layer.lti_keys import LtiToolKeys

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
ASSERTION_TTL = timedelta(minutes=5)
#: A token is renewed this long before the platform says it expires.
EXPIRY_MARGIN = timedelta(seconds=60)
DEFAULT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class _Held:
    token: str
    renew_at: datetime


class LtiTokens:
    """Access tokens per (registration, scopes), cached until shortly before expiry."""

    def __init__(
        self,
        keys: LtiToolKeys,
        clock: Clock,
        session: requests.Session | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self._keys = keys
        self._clock = clock
        self._session = session or requests.Session()
        self._timeout_s = timeout_s
        self._held: dict[tuple[str, frozenset[str]], _Held] = {}

    def token(self, registration: LtiRegistration, scopes: frozenset[str]) -> str:
        """A bearer token for `scopes` on the registration's platform."""
        key = (registration.registration_id, scopes)
        held = self._held.get(key)
        now = self._clock.now()
        if held is not None and now < held.renew_at:
            return held.token
        answer = self._grant(registration, scopes)
        lifetime = timedelta(seconds=float(answer.get("expires_in", 3600)))
        token = answer.get("access_token")
        if not isinstance(token, str) or not token:
            raise LtiRefused("the token endpoint answered no access_token", 200)
        self._held[key] = _Held(token, now + lifetime - EXPIRY_MARGIN)
        return token

    def forget(self, registration: LtiRegistration, scopes: frozenset[str]) -> None:
        """Drop a token the platform no longer accepts (a 401 before its expiry)."""
        self._held.pop((registration.registration_id, scopes), None)

    def _assertion(self, registration: LtiRegistration) -> str:
        now = self._clock.now()
        signing = self._keys.signing_key()
        claims = {
            "iss": registration.client_id,
            "sub": registration.client_id,
            "aud": registration.assertion_audience,
            "iat": int(now.timestamp()),
            "exp": int((now + ASSERTION_TTL).timestamp()),
            "jti": secrets.token_hex(16),
        }
        return jwt.encode(claims, signing.private_key, "RS256", headers={"kid": signing.kid})

    def _grant(self, registration: LtiRegistration, scopes: frozenset[str]) -> dict[str, Any]:
        form = {
            "grant_type": "client_credentials",
            "client_assertion_type": ASSERTION_TYPE,
            "client_assertion": self._assertion(registration),
            "scope": " ".join(sorted(scopes)),
        }
        try:
            answer = call(
                "token request",
                lambda: self._session.post(
                    registration.auth_token_url,
                    data=form,
                    headers={"Accept": "application/json"},
                    timeout=self._timeout_s,
                ),
            )
        except LtiRefused as exc:
            # A refused grant says nothing about the grade: the registration, or Gradeq's
            # key set as the platform reads it, needs the admin. Every write of the school
            # waits (an outage shown to the admin) instead of dropping its grade.
            raise LtiBusy(f"the platform refused Gradeq's token request: {exc}") from exc
        body = answer.json()
        if not isinstance(body, dict):
            raise LtiRefused("the token endpoint answered no JSON object", answer.status_code)
        return body
