"""Gradeq's LTI signing keys: made, sealed, published as JWKS, rotated.

A platform caches the tool's JWKS, so a rotation publishes the new key `lead` before it
signs anything, and keeps the old key published `overlap` after it stops signing (what it
signed, client assertions and login states, lives minutes). The private keys are opened
from their sealed form once per process and never logged.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from shared.domain.lti import ToolKey, tool_key_context
from shared.ports import Clock, LtiStore

KEY_BITS = 2048
DEFAULT_LEAD = timedelta(hours=1)
DEFAULT_OVERLAP = timedelta(hours=1)


class Sealing(Protocol):
    """Seal a secret bound to a context; open it again (the webhook secrets' sealer)."""

    def seal(self, plaintext: str, context: bytes) -> tuple[str, str]: ...

    def open(self, key_id: str, sealed: str, context: bytes) -> str: ...


@dataclass(frozen=True)
class SigningKey:
    """The key to sign with now."""

    kid: str
    private_key: rsa.RSAPrivateKey


class LtiToolKeys:
    """Gradeq's own LTI keys over an LtiStore."""

    def __init__(self, store: LtiStore, sealer: Sealing, clock: Clock) -> None:
        self._store = store
        self._sealer = sealer
        self._clock = clock
        self._opened: dict[str, rsa.RSAPrivateKey] = {}

    def _new_key(self, signs_from: datetime) -> ToolKey:
        private = rsa.generate_private_key(public_exponent=65537, key_size=KEY_BITS)
        kid = ToolKey.new_kid()
        pem = private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
        sealing_key_id, sealed = self._sealer.seal(pem, tool_key_context(kid))
        public = jwt.algorithms.RSAAlgorithm.to_jwk(private.public_key(), as_dict=True)
        key = ToolKey(
            kid=kid,
            sealing_key_id=sealing_key_id,
            sealed=sealed,
            public_jwk={**public, "kid": kid, "alg": "RS256", "use": "sig"},
            created_at=self._clock.now(),
            signs_from=signs_from,
        )
        self._store.add_key(key)
        self._opened[kid] = private
        return key

    def ensure(self) -> ToolKey:
        """The key signing now (of several, the one that started last); the first one is
        made, signing at once, if there is none."""
        now = self._clock.now()
        signing = [k for k in self._store.tool_keys() if k.signs_at(now)]
        if not signing:
            return self._new_key(now)
        return max(signing, key=lambda k: (k.signs_from, k.created_at))

    def rotate(
        self, lead: timedelta = DEFAULT_LEAD, overlap: timedelta = DEFAULT_OVERLAP
    ) -> ToolKey:
        """Publish a new key now, signing from `lead` on; every older key stays published
        until `overlap` after that, then expires."""
        now = self._clock.now()
        older = [k for k in self._store.tool_keys() if k.published_at(now)]
        new = self._new_key(now + lead)
        for key in older:
            self._store.expire_key(key.kid, now + lead + overlap)
        return new

    def signing_key(self) -> SigningKey:
        """The newest key that signs now (made if none does)."""
        key = self.ensure()
        return SigningKey(key.kid, self._private(key))

    def _private(self, key: ToolKey) -> rsa.RSAPrivateKey:
        opened = self._opened.get(key.kid)
        if opened is None:
            pem = self._sealer.open(key.sealing_key_id, key.sealed, tool_key_context(key.kid))
            loaded = serialization.load_pem_private_key(pem.encode(), password=None)
            if not isinstance(loaded, rsa.RSAPrivateKey):
                raise ValueError(f"LTI signing key {key.kid} is not an RSA key")
            opened = self._opened[key.kid] = loaded
        return opened

    def jwks(self) -> dict[str, Any]:
        """The JWKS Gradeq serves: every key published now (the first made if none is)."""
        self.ensure()
        now = self._clock.now()
        return {"keys": [k.public_jwk for k in self._store.tool_keys() if k.published_at(now)]}

    def public_key(self, kid: str) -> rsa.RSAPublicKey | None:
        """A published key's public half (to verify what Gradeq signed itself)."""
        for entry in self.jwks()["keys"]:
            if entry["kid"] == kid:
                key = jwt.algorithms.RSAAlgorithm.from_jwk(entry)
                return key if isinstance(key, rsa.RSAPublicKey) else None
        return None
