"""Each client's webhook signing secrets: shown once when issued, stored only sealed.

A secret reads `whsec_<base64 of 32 random bytes>` (Standard Webhooks). The signer needs
the secret itself to compute the HMAC, so it cannot be kept as a digest like an API key:
the stored record holds it encrypted under a key-encryption key (`sealed`, with the id
of the key that sealed it). A client has one current secret; rotating gives the old one
an expiry, and until then every webhook carries a signature by each (the receiver keeps
whichever it has).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from shared.domain.errors import GradeqError

PREFIX = "whsec_"
SECRET_BYTES = 32


class WebhookSecretNotFound(GradeqError):
    slug = "webhook-secret-not-found"
    title = "No such webhook secret"
    status = 404


def new_signing_secret() -> str:
    """A fresh `whsec_...` secret (256 random bits)."""
    return PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def is_signing_secret(text: str) -> bool:
    """Whether `text` is a `whsec_...` secret of at least 192 bits."""
    if not text.startswith(PREFIX):
        return False
    try:
        raw = base64.b64decode(text.removeprefix(PREFIX), validate=True)
    except (binascii.Error, ValueError):
        return False
    return len(raw) >= 24


def sealing_context(client_id: str, secret_id: str) -> bytes:
    """What a sealed secret is bound to, so it cannot be moved to another client's record."""
    return f"gradeq-webhook-secret\n{client_id}\n{secret_id}".encode()


@dataclass(frozen=True)
class WebhookSecret:
    """One client's signing secret as stored: sealed, with when it stops signing."""

    secret_id: str
    client_id: str
    #: The id of the key-encryption key that sealed it.
    key_id: str
    sealed: str
    created_at: datetime
    expires_at: datetime | None = None

    @staticmethod
    def new_id() -> str:
        return secrets.token_hex(6)

    def signs_at(self, now: datetime) -> bool:
        """Whether webhooks sent at `now` carry a signature by this secret."""
        return self.expires_at is None or now < self.expires_at

    def expire(self, at: datetime) -> WebhookSecret:
        """The secret signing until `at` (an earlier expiry stays)."""
        if self.expires_at is not None and self.expires_at <= at:
            return self
        return dataclasses.replace(self, expires_at=at)

    def to_record(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> WebhookSecret:
        return cls(
            secret_id=record["secret_id"],
            client_id=record["client_id"],
            key_id=record["key_id"],
            sealed=record["sealed"],
            created_at=record["created_at"],
            expires_at=record.get("expires_at"),
        )

    def public_view(self) -> dict[str, Any]:
        """What an admin listing shows: everything but the sealed secret."""
        return {
            "secret_id": self.secret_id,
            "client_id": self.client_id,
            "created_at": self.created_at.isoformat(),
            "expires_at": self.expires_at.isoformat() if self.expires_at else None,
        }
