"""Authenticate operators by bearer key, apart from client keys."""

from __future__ import annotations

import hashlib
import hmac

from flask import request

from shared.domain.errors import GradeqError
from shared.http.errors import Unauthenticated
from shared.http.failed_auth import FailedAuthLimiter

_HASHED = "sha256:"


class OperatorCredentialRequired(GradeqError):
    slug = "operator-credential-required"
    title = "This route needs an operator credential"
    status = 403


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


class OperatorAuthenticator:
    """Map `Authorization: Bearer <key>` to an operator name, comparing digests in constant
    time. Any other bearer key (a client's included) is refused with 403."""

    def __init__(self, keys: dict[str, str], failures: FailedAuthLimiter | None = None) -> None:
        self._digests = [
            (bytes.fromhex(k.removeprefix(_HASHED)) if k.startswith(_HASHED) else _digest(k), name)
            for k, name in keys.items()
        ]
        self._failures = failures

    def operator(self) -> str:
        """The operator's name; 429 for a credential past its failed authentications."""
        if self._failures is None:
            return self._authenticate()
        refused = (Unauthenticated, OperatorCredentialRequired)
        return self._failures.guard("operator", self._authenticate, refused=refused)

    def _authenticate(self) -> str:
        scheme, _, key = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not key:
            raise Unauthenticated("send an operator key as 'Authorization: Bearer <key>'")
        digest = _digest(key)
        found = None
        for known, name in self._digests:
            if hmac.compare_digest(known, digest):
                found = name
        if found is None:
            raise OperatorCredentialRequired("this key is not an operator key")
        return found
