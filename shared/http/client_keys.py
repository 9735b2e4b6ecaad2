"""API keys at the HTTP edge: read the bearer credential and map a key to its client."""

from __future__ import annotations

import threading
from collections import OrderedDict

from flask import request

from shared.domain.api_keys import ApiKey, key_id_of
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


class UnknownKeyIds:
    """Key ids the store did not have, remembered for `ttl_s` (at most `max_size` of them).

    Each well-formed key costs a store read (a billed Firestore read); a caller trying made
    up keys again and again is answered from here. A key id is random and issued with
    its key, so a key made after its id was remembered here is practically impossible.
    """

    def __init__(self, ttl_s: float, max_size: int, clock: Clock) -> None:
        self._ttl_s = ttl_s
        self._max_size = max_size
        self._clock = clock
        self._until: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._until)

    def __contains__(self, key_id: object) -> bool:
        if not isinstance(key_id, str):
            return False
        now = self._clock.now().timestamp()
        with self._lock:
            until = self._until.get(key_id)
            if until is None:
                return False
            if until <= now:
                del self._until[key_id]
                return False
            return True

    def add(self, key_id: str) -> None:
        if self._ttl_s <= 0:
            return
        with self._lock:
            self._until.pop(key_id, None)
            self._until[key_id] = self._clock.now().timestamp() + self._ttl_s
            while len(self._until) > self._max_size:
                self._until.popitem(last=False)  # the oldest entry goes first


class ApiKeyAuthenticator:
    """Map an API key (`gq_...`) to its client id through the key store."""

    def __init__(
        self,
        keys: ApiKeyStore,
        clock: Clock,
        unknown_ttl_s: float = 60.0,
        unknown_max: int = 10_000,
    ) -> None:
        self._keys = keys
        self._clock = clock
        self._unknown = UnknownKeyIds(unknown_ttl_s, unknown_max, clock)

    def client_for(self, key: str) -> str:
        key_id = key_id_of(key)
        stored = self._lookup(key_id) if key_id else None
        # One message for unknown, wrong, revoked and expired keys: nothing to probe.
        if stored is None or not stored.matches(key) or not stored.usable(self._clock.now()):
            raise Unauthenticated("unknown, revoked or expired API key")
        if USER_SCOPE_MARK in stored.client_id:
            # A record written before user scopes were reserved must not speak for a user.
            raise Unauthenticated("unknown, revoked or expired API key")
        return stored.client_id

    def _lookup(self, key_id: str) -> ApiKey | None:
        if key_id in self._unknown:
            return None
        stored = self._keys.get(key_id)
        if stored is None:
            self._unknown.add(key_id)
        return stored
