"""ContextCacheRecords on Firestore: one document per prompt prefix and model.

A claim is a `create` (refused if the document exists); a replacement is an update
conditioned on the version read, so of two workers taking over a stale claim one wins.
"""

from __future__ import annotations

from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import firestore
from google.cloud.firestore_v1.base_query import FieldFilter

from shared.domain.context_cache import ContextCacheRecord
from shared.domain.errors import DependencyUnavailable


def _fields(record: ContextCacheRecord) -> dict[str, Any]:
    return {
        "key": record.key,
        "assignment_id": record.assignment_id,
        "model": record.model,
        "name": record.name,
        "expire_at": record.expire_at,
    }


def _record(data: dict[str, Any]) -> ContextCacheRecord:
    return ContextCacheRecord(
        data["key"], data["assignment_id"], data["model"], data["name"], data["expire_at"]
    )


class FirestoreContextCacheRecords:
    def __init__(self, client: firestore.Client, collection: str, deadline_s: float = 10.0) -> None:
        self._client = client
        self._records = client.collection(collection)
        self._deadline_s = deadline_s

    def get(self, key: str) -> ContextCacheRecord | None:
        try:
            snapshot = self._records.document(key).get(timeout=self._deadline_s)
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore context caches: read failed: {exc}") from exc
        return _record(snapshot.to_dict() or {}) if snapshot.exists else None

    def claim(self, record: ContextCacheRecord) -> bool:
        try:
            self._records.document(record.key).create(_fields(record), timeout=self._deadline_s)
        except gexc.AlreadyExists:
            return False
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore context caches: claim failed: {exc}") from exc
        return True

    def replace(self, old: ContextCacheRecord, new: ContextCacheRecord) -> bool:
        ref = self._records.document(old.key)
        try:
            snapshot = ref.get(timeout=self._deadline_s)
            if not snapshot.exists or _record(snapshot.to_dict() or {}) != old:
                return False
            option = self._client.write_option(last_update_time=snapshot.update_time)
            ref.update(_fields(new), option=option, timeout=self._deadline_s)
        except gexc.FailedPrecondition:
            return False
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore context caches: update failed: {exc}") from exc
        return True

    def of_assignment(self, assignment_id: str) -> list[ContextCacheRecord]:
        query = self._records.where(filter=FieldFilter("assignment_id", "==", assignment_id))
        try:
            found = [_record(s.to_dict() or {}) for s in query.stream(timeout=self._deadline_s)]
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore context caches: list failed: {exc}") from exc
        return sorted(found, key=lambda r: r.key)

    def remove(self, key: str) -> None:
        try:
            self._records.document(key).delete(timeout=self._deadline_s)
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore context caches: delete failed: {exc}") from exc
