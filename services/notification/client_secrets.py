"""Issue, rotate, revoke and read clients' webhook signing secrets."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from services.notification.sealing import Sealer
from shared.domain.errors import GradeqError
from shared.domain.webhook_secrets import (
    WebhookSecret,
    is_signing_secret,
    new_signing_secret,
    sealing_context,
)
from shared.ports import Clock, WebhookSecretStore


class SecretExists(GradeqError):
    slug = "webhook-secret-exists"
    title = "The client already has a webhook secret"
    status = 409


@dataclass(frozen=True)
class Issued:
    """A new secret: `secret` is shown once and kept nowhere in plain text."""

    secret: str
    record: WebhookSecret


class ClientSecrets:
    """Each client's webhook secrets, sealed in the store."""

    def __init__(self, store: WebhookSecretStore, sealer: Sealer, clock: Clock) -> None:
        self._store = store
        self._sealer = sealer
        self._clock = clock

    def _signing(self, client_id: str) -> list[WebhookSecret]:
        now = self._clock.now()
        return [s for s in self._store.list(client_id) if s.signs_at(now)]

    def _issue(self, client_id: str, plaintext: str | None = None) -> Issued:
        secret_id, plaintext = WebhookSecret.new_id(), plaintext or new_signing_secret()
        key_id, sealed = self._sealer.seal(plaintext, sealing_context(client_id, secret_id))
        record = WebhookSecret(secret_id, client_id, key_id, sealed, self._clock.now())
        self._store.add(record)
        return Issued(plaintext, record)

    def create(self, client_id: str, existing: str | None = None) -> Issued:
        """The client's first secret; SecretExists while one still signs (rotate instead).

        `existing` adopts a secret the client already holds (the shared secret of an
        older deployment, say) instead of making one; rotate it away afterwards.
        """
        if existing is not None and not is_signing_secret(existing):
            raise ValueError("a webhook secret reads whsec_<base64 of at least 24 bytes>")
        if self._signing(client_id):
            raise SecretExists(f"client {client_id} has a webhook secret; rotate it instead")
        return self._issue(client_id, existing)

    def rotate(self, client_id: str, overlap: timedelta) -> Issued:
        """A new secret; the ones signing now keep signing for `overlap` (at most)."""
        if overlap < timedelta(0):
            raise ValueError("the overlap cannot be negative")
        current = self._signing(client_id)
        issued = self._issue(client_id)
        until = self._clock.now() + overlap
        for old in current:
            self._store.expire(old.secret_id, until)
        return issued

    def revoke(self, secret_id: str) -> WebhookSecret:
        """Stop signing with this secret now."""
        return self._store.expire(secret_id, self._clock.now())

    def listing(self, client_id: str | None = None) -> list[WebhookSecret]:
        return self._store.list(client_id)

    def signing_secrets(self, client_id: str) -> list[str]:
        """The client's secrets that sign now, newest first (none: nothing may be sent)."""
        return [
            self._sealer.open(s.key_id, s.sealed, sealing_context(s.client_id, s.secret_id))
            for s in reversed(self._signing(client_id))
        ]
