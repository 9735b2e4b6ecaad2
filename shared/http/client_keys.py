"""API keys at the HTTP edge: read the bearer credential and map a key to its client."""

from __future__ import annotations

from flask import request

from shared.domain.api_keys import key_id_of
from shared.domain.client_ids import USER_SCOPE_MARK
from shared.http.errors import Unauthenticated
from shared.ports import ApiKeyStore, Clock


def bearer_credential() -> str:
    """The credential of `Authorization: Bearer <credential>`, or Unauthenticated."""
    scheme, _, credential = request.headers.get("Authorization", "").partition(" ")
    credential = credential.strip()
    if scheme.lower() != "bearer" or not credential:
        raise Unauthenticated("send 'Authorization: Bearer <credential>'")
    return credential


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
        if USER_SCOPE_MARK in stored.client_id:
            # A record written before user scopes were reserved must not speak for a user.
            raise Unauthenticated("unknown, revoked or expired API key")
        return stored.client_id
