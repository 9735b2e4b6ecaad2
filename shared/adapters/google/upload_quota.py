"""UploadQuota on Firestore: one document per client, holding the current UTC day's bytes.

A reservation is one transaction (a read and a write): a new day starts the count again,
and a count that would pass the limit writes nothing. One document per client, rewritten
each day, so the collection never grows with time. Upload URLs are rate limited per client
(`GRADEQ_UPLOAD_RATE_PER_S`), which keeps each document's writes within what Firestore
sustains.
"""

from __future__ import annotations

import hashlib
from datetime import date
from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import firestore

from shared.domain.errors import DependencyUnavailable

#: Attempts of one reservation's transaction under contention (the client's own bursts).
MAX_ATTEMPTS = 20


class FirestoreUploadQuota:
    """UploadQuota in a Firestore collection."""

    def __init__(self, client: firestore.Client, collection: str, deadline_s: float = 10.0) -> None:
        self._client = client
        self._quota = client.collection(collection)
        self._deadline_s = deadline_s

    def reserve(self, client_id: str, day: date, size: int, limit: int) -> bool:
        if size > limit:
            return False
        # A digest keeps client ids out of document names, as object names do.
        ref = self._quota.document(hashlib.sha256(client_id.encode()).hexdigest()[:32])
        today = day.isoformat()

        @firestore.transactional
        def apply(transaction: Any) -> bool:
            snapshot = ref.get(transaction=transaction, timeout=self._deadline_s)
            stored = snapshot.to_dict() if snapshot.exists else None
            used = int(stored["bytes"]) if stored and stored.get("day") == today else 0
            if used + size > limit:
                return False
            transaction.set(ref, {"client_id": client_id, "day": today, "bytes": used + size})
            return True

        try:
            granted: bool = apply(self._client.transaction(max_attempts=MAX_ATTEMPTS))
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore upload quota failed: {exc}") from exc
        return granted
