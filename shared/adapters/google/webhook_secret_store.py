"""WebhookSecretStore on Firestore: one document per secret id, holding the sealed secret."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import firestore

from shared.adapters.google import metering
from shared.adapters.google.clients import DEFAULT_DEADLINE_S, bounded_retry
from shared.adapters.google.firestore_codec import with_plain_datetimes
from shared.adapters.google.firestore_queries import documents_of_client
from shared.domain.errors import DependencyUnavailable
from shared.domain.webhook_secrets import WebhookSecret, WebhookSecretNotFound

_DATETIMES = ("created_at", "expires_at")


def _from_document(data: dict[str, Any]) -> WebhookSecret:
    return WebhookSecret.from_record(with_plain_datetimes(data, _DATETIMES))


class FirestoreWebhookSecretStore:
    """Webhook secrets in one Firestore collection, named by secret id."""

    def __init__(
        self,
        client: firestore.Client,
        collection: str = "webhook_secrets",
        deadline_s: float = DEFAULT_DEADLINE_S,
    ) -> None:
        self._client = client
        self._secrets = client.collection(collection)
        self._retry = bounded_retry(deadline_s)
        self._deadline_s = deadline_s
        self.meter = metering.Meter()

    def add(self, secret: WebhookSecret) -> None:
        self.meter.add(metering.FIRESTORE_WRITES)
        try:
            self._secrets.document(secret.secret_id).create(
                secret.to_record(), retry=self._retry, timeout=self._deadline_s
            )
        except gexc.AlreadyExists as exc:
            raise ValueError(f"webhook secret id {secret.secret_id} already exists") from exc
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore create failed: {exc}") from exc

    def list(self, client_id: str | None = None) -> list[WebhookSecret]:
        documents = documents_of_client(
            self._secrets, client_id, self._retry, self._deadline_s, self.meter
        )
        found = [_from_document(data) for data in documents]
        return sorted(found, key=lambda s: (s.created_at, s.secret_id))

    def expire(self, secret_id: str, at: datetime) -> WebhookSecret:
        ref = self._secrets.document(secret_id)

        @firestore.transactional
        def apply(transaction: firestore.Transaction) -> WebhookSecret:
            snapshot = ref.get(transaction=transaction, retry=self._retry, timeout=self._deadline_s)
            if not snapshot.exists:
                raise WebhookSecretNotFound(f"no webhook secret {secret_id}")
            expired = _from_document(snapshot.to_dict() or {}).expire(at)
            transaction.update(ref, {"expires_at": expired.expires_at})
            return expired

        try:
            result: WebhookSecret = apply(self._client.transaction())
        except WebhookSecretNotFound:
            raise
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore update failed: {exc}") from exc
        self.meter.add(metering.FIRESTORE_WRITES)
        return result
