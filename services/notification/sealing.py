"""Seal clients' webhook secrets at rest: AES-256-GCM under a key-encryption key.

Why sealed and symmetric: receivers keep the HMAC `v1` signatures that every Standard
Webhooks library verifies (the Python library checks no `v1a` ed25519 signatures), and
the signer needs each secret itself, so the store holds it encrypted, bound to its
client and secret id, and a copy of the store alone opens nothing.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import secrets

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from shared.domain.errors import GradeqError

KEY_BYTES = 32
NONCE_BYTES = 12


class SecretUnreadable(GradeqError):
    """A stored secret was sealed by a key this service does not hold, or was altered."""

    slug = "webhook-secret-unreadable"
    title = "A webhook secret could not be opened"
    status = 500


def new_sealing_key() -> str:
    """A fresh key-encryption key, as GRADEQ_WEBHOOK_SECRETS_KEY holds it."""
    return base64.urlsafe_b64encode(secrets.token_bytes(KEY_BYTES)).decode()


def _key_id(key: bytes) -> str:
    return hashlib.sha256(b"gradeq-webhook-secrets-key\n" + key).hexdigest()[:12]


def _decode_key(text: str) -> bytes:
    try:
        key = base64.urlsafe_b64decode(text.replace("+", "-").replace("/", "_") + "==")
    except (binascii.Error, ValueError):
        key = b""
    if len(key) != KEY_BYTES:
        # The message never includes the key itself.
        raise ValueError("GRADEQ_WEBHOOK_SECRETS_KEY holds base64 keys of 32 bytes")
    return key


class Sealer:
    """Seal with the first key; open with whichever key sealed."""

    def __init__(self, keys: list[bytes]) -> None:
        if not keys:
            raise ValueError("GRADEQ_WEBHOOK_SECRETS_KEY must be set (base64 of 32 bytes)")
        self._keys = {_key_id(key): AESGCM(key) for key in keys}
        self._current = _key_id(keys[0])

    @classmethod
    def from_setting(cls, value: str) -> Sealer:
        """Parse GRADEQ_WEBHOOK_SECRETS_KEY: comma-separated keys, the sealing one first."""
        return cls([_decode_key(part.strip()) for part in value.split(",") if part.strip()])

    def seal(self, plaintext: str, context: bytes) -> tuple[str, str]:
        """(id of the sealing key, base64 of nonce and ciphertext) bound to `context`."""
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._keys[self._current].encrypt(nonce, plaintext.encode(), context)
        return self._current, base64.b64encode(nonce + sealed).decode()

    def open(self, key_id: str, sealed: str, context: bytes) -> str:
        """The plaintext, or SecretUnreadable (unknown key, altered or moved record)."""
        aead = self._keys.get(key_id)
        if aead is None:
            raise SecretUnreadable(f"sealed by key {key_id}, which is not configured")
        try:
            raw = base64.b64decode(sealed, validate=True)
            return aead.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], context).decode()
        except (InvalidTag, binascii.Error, ValueError) as exc:
            raise SecretUnreadable("a sealed webhook secret does not open") from exc
