"""Authenticate API clients by bearer key; every job is scoped to its client."""

from __future__ import annotations

from flask import request

from shared.domain.api_keys import key_id_of
from shared.http.errors import Unauthenticated
from shared.ports import ApiKeyStore, Clock


class ApiKeyAuthenticator:
    """Map `Authorization: Bearer gq_...` to a client id through the key store."""

    def __init__(self, keys: ApiKeyStore, clock: Clock) -> None:
        self._keys = keys
        self._clock = clock

    def client_id(self) -> str:
        scheme, _, key = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not key:
            raise Unauthenticated("send your API key as 'Authorization: Bearer <key>'")
        key_id = key_id_of(key)
        stored = self._keys.get(key_id) if key_id else None
        # One message for unknown, wrong, revoked and expired keys: nothing to probe.
        if stored is None or not stored.matches(key) or not stored.usable(self._clock.now()):
            raise Unauthenticated("unknown, revoked or expired API key")
        return stored.client_id
