"""ApiKeyStore on Firestore: one document per key id, holding the digest, never the key.

A key found is remembered briefly by the process (`shared.adapters.key_cache`), so a
client's requests within KEY_CACHE_S cost no read; a revocation by another instance or
process takes effect within KEY_CACHE_S, in this process at once.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import firestore

from shared.adapters.google import metering
from shared.adapters.google.clients import DEFAULT_DEADLINE_S, bounded_retry
from shared.adapters.google.firestore_codec import with_plain_datetimes
from shared.adapters.google.firestore_queries import documents_of_client
from shared.adapters.key_cache import FOUND_KEYS, KEY_CACHE_S, FoundKeys
from shared.domain.api_keys import ApiKey, ApiKeyNotFound
from shared.domain.errors import DependencyUnavailable

_DATETIMES = ("created_at", "expires_at", "revoked_at")


def _from_document(data: dict[str, Any]) -> ApiKey:
    return ApiKey.from_record(with_plain_datetimes(data, _DATETIMES))


class FirestoreApiKeyStore:
    """API keys in one Firestore collection, named by key id."""

    def __init__(
        self,
        client: firestore.Client,
        collection: str = "api_keys",
        deadline_s: float = DEFAULT_DEADLINE_S,
        cache_s: float = KEY_CACHE_S,
        found: FoundKeys = FOUND_KEYS,
    ) -> None:
        self._found = found
        self._client = client
        self._keys = client.collection(collection)
        # Where the records live: stores of this process on the same ones share memories.
        self._where = (client.project, client._database, collection)
        self._cache_s = cache_s
        self._retry = bounded_retry(deadline_s)
        self._deadline_s = deadline_s
        self.meter = metering.Meter()

    def add(self, key: ApiKey) -> None:
        self._found.forget(self._where, key.key_id)
        self.meter.add(metering.FIRESTORE_WRITES)
        try:
            self._keys.document(key.key_id).create(
                key.to_record(), retry=self._retry, timeout=self._deadline_s
            )
        except gexc.AlreadyExists as exc:
            raise ValueError(f"API key id {key.key_id} already exists") from exc
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore create failed: {exc}") from exc

    def get(self, key_id: str) -> ApiKey | None:
        remembered = self._found.get(self._where, key_id)
        if remembered is not None:
            return remembered
        now = self._found.now()
        self.meter.add(metering.FIRESTORE_READS)
        try:
            snapshot = self._keys.document(key_id).get(retry=self._retry, timeout=self._deadline_s)
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore get failed: {exc}") from exc
        if not snapshot.exists:
            return None
        key = _from_document(snapshot.to_dict() or {})
        self._found.remember(self._where, key, self._cache_s, since=now)
        return key

    def list(self, client_id: str | None = None) -> list[ApiKey]:
        documents = documents_of_client(
            self._keys, client_id, self._retry, self._deadline_s, self.meter
        )
        keys = [_from_document(data) for data in documents]
        return sorted(keys, key=lambda k: (k.created_at, k.key_id))

    def revoke(self, key_id: str, now: datetime) -> ApiKey:
        self._found.forget(self._where, key_id)
        ref = self._keys.document(key_id)

        @firestore.transactional
        def apply(transaction: firestore.Transaction) -> ApiKey:
            snapshot = ref.get(transaction=transaction, retry=self._retry, timeout=self._deadline_s)
            if not snapshot.exists:
                raise ApiKeyNotFound(f"no API key {key_id}")
            revoked = _from_document(snapshot.to_dict() or {}).revoke(now)
            transaction.update(ref, {"revoked_at": revoked.revoked_at})
            return revoked

        try:
            result: ApiKey = apply(self._client.transaction())
        except ApiKeyNotFound:
            raise
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore update failed: {exc}") from exc
        finally:
            # Also after the commit: a reader in between may have remembered the old record.
            self._found.forget(self._where, key_id)
        self.meter.add(metering.FIRESTORE_WRITES)
        return result
