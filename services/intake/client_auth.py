"""Authenticate callers: server clients by API key, web frontends by Firebase ID token.

Either way the caller becomes one client id, and every job is scoped to it.
"""

from __future__ import annotations

from flask import request

from services.intake.firebase_auth import FirebaseAuthenticator
from shared.domain.api_keys import PREFIX, key_id_of
from shared.http.errors import Unauthenticated
from shared.ports import ApiKeyStore, Clock

#: A frontend sends this header (value "user") to scope jobs to the signed-in user.
SCOPE_HEADER = "Gradeq-Scope"


class ApiKeyAuthenticator:
    """Map an API key (`gq_...`) to its client id through the key store."""

    def __init__(self, keys: ApiKeyStore, clock: Clock) -> None:
        self._keys = keys
        self._clock = clock

    def client_for(self, key: str) -> str:
        key_id = key_id_of(key)
        stored = self._keys.get(key_id) if key_id else None
        # One message for unknown, wrong, revoked and expired keys: nothing to probe.
        if stored is None or not stored.matches(key) or not stored.usable(self._clock.now()):
            raise Unauthenticated("unknown, revoked or expired API key")
        return stored.client_id


class ClientAuthenticator:
    """Read `Authorization: Bearer ...` and answer the caller's client id."""

    def __init__(
        self, api_keys: ApiKeyAuthenticator, firebase: FirebaseAuthenticator | None = None
    ) -> None:
        self._api_keys = api_keys
        self._firebase = firebase

    def client_id(self) -> str:
        scheme, _, credential = request.headers.get("Authorization", "").partition(" ")
        credential = credential.strip()
        if scheme.lower() != "bearer" or not credential:
            raise Unauthenticated("send 'Authorization: Bearer <API key or ID token>'")
        if credential.startswith(PREFIX):
            return self._api_keys.client_for(credential)
        if self._firebase is not None and credential.count(".") == 2:
            per_user = request.headers.get(SCOPE_HEADER, "").strip().lower() == "user"
            return self._firebase.client_for(credential, per_user)
        raise Unauthenticated("unknown credential")
