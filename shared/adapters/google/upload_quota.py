"""UploadQuota on Firestore: one document per client, holding the current UTC day's bytes.

A reservation reads the document and writes it back conditioned on the version it read
(no read-write transaction, as the job store writes): a new day starts the count again, a
count that would pass the limit writes nothing, and a reservation that lost a race counts
again on what the winner wrote. One document per client, rewritten each day, so the
collection never grows with time; upload URLs are rate limited per client
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

#: Rounds one reservation may lose to racing ones before it answers 503 (each round,
#: one of the racers wins).
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
        try:
            for _ in range(MAX_ATTEMPTS):
                snapshot: Any = ref.get(timeout=self._deadline_s)
                stored = snapshot.to_dict() if snapshot.exists else None
                used = int(stored["bytes"]) if stored and stored.get("day") == today else 0
                if used + size > limit:
                    return False
                document = {"client_id": client_id, "day": today, "bytes": used + size}
                try:
                    if snapshot.exists:
                        option = self._client.write_option(last_update_time=snapshot.update_time)
                        ref.update(document, option=option, timeout=self._deadline_s)
                    else:
                        ref.create(document, timeout=self._deadline_s)
                    return True
                except (gexc.FailedPrecondition, gexc.AlreadyExists):
                    continue  # another reservation wrote first: count again on what it wrote
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore upload quota failed: {exc}") from exc
        raise DependencyUnavailable(
            f"the upload quota of a client changed {MAX_ATTEMPTS} times during one reservation"
        )
