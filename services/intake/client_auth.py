"""Authenticate API clients by bearer key; every job is scoped to its client."""

from __future__ import annotations

import hashlib
import hmac

from flask import request

from shared.http.errors import Unauthenticated


class ApiKeyAuthenticator:
    """Map `Authorization: Bearer <key>` to a client id, comparing digests in constant time."""

    def __init__(self, keys: dict[str, str]) -> None:
        if not keys:
            raise ValueError("GRADEQ_CLIENT_KEYS is empty: no client could use the API")
        self._digests = [(hashlib.sha256(k.encode()).digest(), c) for k, c in keys.items()]

    def client_id(self) -> str:
        scheme, _, key = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not key:
            raise Unauthenticated("send your API key as 'Authorization: Bearer <key>'")
        digest = hashlib.sha256(key.encode()).digest()
        found = None
        for known, client in self._digests:
            if hmac.compare_digest(known, digest):
                found = client
        if found is None:
            raise Unauthenticated("unknown API key")
        return found
