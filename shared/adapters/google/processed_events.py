"""ProcessedEvents on Firestore: one document per (subscriber, event id), created once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import firestore
from google.cloud.firestore_v1.base_query import FieldFilter

from shared.adapters.google import metering
from shared.adapters.google.clients import DEFAULT_DEADLINE_S, bounded_retry
from shared.adapters.google.firestore_codec import SERVER_CREATED_FIELD, TTL_FIELD
from shared.domain.erasure import is_tombstone
from shared.domain.errors import DependencyUnavailable


class FirestoreProcessedEvents:
    """Subscriber dedup records; `create()` makes the first delivery win atomically."""

    def __init__(
        self,
        client: firestore.Client,
        collection: str = "processed_events",
        ttl: timedelta = timedelta(days=30),
        deadline_s: float = DEFAULT_DEADLINE_S,
    ) -> None:
        self._events = client.collection(collection)
        self._ttl = ttl
        self._retry = bounded_retry(deadline_s)
        self._deadline_s = deadline_s
        self.meter = metering.Meter()

    @staticmethod
    def _doc_id(subscriber: str, event_id: str) -> str:
        # Event ids are hashes, so the id spreads evenly; "/" is not allowed in ids.
        return f"{subscriber}:{event_id}".replace("/", "_")

    def add(self, subscriber: str, event_id: str, record: dict[str, object]) -> bool:
        document = {
            "subscriber": subscriber,
            "event_id": event_id,
            "record": record,
            # Redeliveries stop long before the TTL (Pub/Sub keeps messages <= 7 days).
            TTL_FIELD: datetime.now(UTC) + self._ttl,
            SERVER_CREATED_FIELD: firestore.SERVER_TIMESTAMP,
        }
        self.meter.add(metering.FIRESTORE_WRITES)
        try:
            self._events.document(self._doc_id(subscriber, event_id)).create(
                document, retry=self._retry, timeout=self._deadline_s
            )
        except gexc.AlreadyExists:
            return False
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore create failed: {exc}") from exc
        return True

    def records(self, subscriber: str) -> list[dict[str, Any]]:
        """Every record the subscriber stored (local reporting; BigQuery serves production);
        an erased event's tombstone is no record."""
        query = self._events.where(filter=FieldFilter("subscriber", "==", subscriber))
        try:
            snapshots = list(query.stream(retry=self._retry, timeout=self._deadline_s))
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore query failed: {exc}") from exc
        self.meter.add(metering.FIRESTORE_READS, max(1, len(snapshots)))
        records = [dict(s.get("record")) for s in snapshots]
        return [r for r in records if not is_tombstone(r)]

    def contains(self, subscriber: str, event_id: str) -> bool:
        self.meter.add(metering.FIRESTORE_READS)
        try:
            snapshot = self._events.document(self._doc_id(subscriber, event_id)).get(
                retry=self._retry, timeout=self._deadline_s
            )
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore get failed: {exc}") from exc
        return bool(snapshot.exists)
