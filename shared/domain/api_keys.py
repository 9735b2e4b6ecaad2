"""API keys of server clients: shown once when issued, stored only as a SHA-256 digest.

A key reads `gq_<key id>_<secret>`. The key id names the stored record (so a lookup is
one read and an admin can list and revoke keys by it); the secret is 256 random bits, so
a plain SHA-256 of the whole key is enough to make the stored digest useless to a thief.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from shared.domain.client_ids import check_client_id
from shared.domain.errors import GradeqError

PREFIX = "gq_"
_KEY = re.compile(r"^gq_([a-z0-9]{1,32})_([A-Za-z0-9_\-]{16,128})$")


class ApiKeyNotFound(GradeqError):
    slug = "api-key-not-found"
    title = "No such API key"
    status = 404


def digest_of(key: str) -> str:
    """The stored form of a key."""
    return hashlib.sha256(key.encode()).hexdigest()


def key_id_of(key: str) -> str | None:
    """The key id a presented key names, or None when it is not shaped like a key."""
    match = _KEY.match(key)
    return match.group(1) if match else None


@dataclass(frozen=True)
class ApiKey:
    """One issued key: whose it is, its digest, and when it stops working."""

    key_id: str
    client_id: str
    digest: str
    created_at: datetime
    expires_at: datetime | None = None
    revoked_at: datetime | None = None

    @classmethod
    def issue(
        cls,
        client_id: str,
        now: datetime,
        expires_at: datetime | None = None,
        *,
        key_id: str | None = None,
        secret: str | None = None,
    ) -> tuple[str, ApiKey]:
        """Make a new key; return (the key to hand over once, the record to store).

        ValueError when `client_id` may not name a client (blank, or a user scope).
        """
        check_client_id(client_id)
        key_id = key_id or secrets.token_hex(6)
        key = f"{PREFIX}{key_id}_{secret or secrets.token_urlsafe(32)}"
        if key_id_of(key) != key_id:
            raise ValueError("a key id is 1-32 lowercase letters or digits")
        return key, cls(key_id, client_id, digest_of(key), now, expires_at)

    def matches(self, key: str) -> bool:
        """Whether `key` is this key (constant-time comparison of digests)."""
        return hmac.compare_digest(self.digest, digest_of(key))

    def usable(self, now: datetime) -> bool:
        """Neither revoked nor expired at `now`."""
        if self.revoked_at is not None:
            return False
        return self.expires_at is None or now < self.expires_at

    def revoke(self, now: datetime) -> ApiKey:
        """The key revoked at `now` (revoking twice keeps the first time)."""
        return self if self.revoked_at else dataclasses.replace(self, revoked_at=now)

    def to_record(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> ApiKey:
        return cls(
            key_id=record["key_id"],
            client_id=record["client_id"],
            digest=record["digest"],
            created_at=record["created_at"],
            expires_at=record.get("expires_at"),
            revoked_at=record.get("revoked_at"),
        )

    def public_view(self) -> dict[str, Any]:
        """What an admin listing shows: everything but the digest."""

        def iso(moment: datetime | None) -> str | None:
            return moment.isoformat() if moment else None

        return {
            "key_id": self.key_id,
            "client_id": self.client_id,
            "created_at": iso(self.created_at),
            "expires_at": iso(self.expires_at),
            "revoked_at": iso(self.revoked_at),
        }
