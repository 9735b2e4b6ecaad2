"""JobEraser on Firestore: the job document, its tally change and its events' dedup records.

The document is deleted in a transaction that first reads it (so a job that changed
meanwhile is left alone) and adds its tally removal to one shard in the same commit. Its
events' records are overwritten with tombstones (a write, not a delete: a subscriber's
create racing with it either lands first and is overwritten, or finds the tombstone and
records nothing), for every subscriber that had one and every subscriber that records
events; the tombstones expire with the processed events' TTL.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import firestore
from google.cloud.firestore_v1.base_query import And, Or

from shared.adapters.google.assignment_store import FirestoreTally
from shared.adapters.google.firestore_codec import SERVER_CREATED_FIELD, TTL_FIELD, from_document
from shared.domain.client_ids import USER_SCOPE_MARK
from shared.domain.erasure import RECORDING_SUBSCRIBERS, TOMBSTONE, is_tombstone, tally_removal
from shared.domain.errors import DependencyUnavailable
from shared.domain.job import Job

#: Firestore's limit on the values of one `in` filter.
IN_LIMIT = 30
#: Writes per batch commit (Firestore allows 500).
BATCH_WRITES = 400


class FirestoreJobEraser:
    """JobEraser over the collections the Firestore adapters write."""

    def __init__(
        self,
        client: firestore.Client,
        jobs_collection: str,
        tallies_collection: str,
        processed_collection: str,
        deadline_s: float = 10.0,
        processed_ttl: timedelta = timedelta(days=30),
    ) -> None:
        self._client = client
        self._jobs = client.collection(jobs_collection)
        self._tally = FirestoreTally(client, tallies_collection)
        self._processed = client.collection(processed_collection)
        self._deadline_s = deadline_s
        self._processed_ttl = processed_ttl

    def jobs_of_student(self, client_id: str, student_id: str, limit: int) -> list[Job]:
        # The school's jobs naming the student; those stored before jobs had an author
        # (client id `<school>:user:<uid>`, index jobs_student_client): any user's naming
        # the student, and the student's own as a signed-in user, whatever they name.
        legacy = client_id + USER_SCOPE_MARK
        names = firestore.FieldFilter("request.student_id", "==", student_id)
        users = [
            firestore.FieldFilter("client_id", ">=", legacy),
            firestore.FieldFilter("client_id", "<", legacy[:-1] + chr(ord(legacy[-1]) + 1)),
        ]
        query: Any = self._jobs.where(
            filter=Or(
                [
                    And([firestore.FieldFilter("client_id", "==", client_id), names]),
                    And([*users, names]),
                    firestore.FieldFilter("client_id", "==", legacy + student_id),
                ]
            )
        )
        try:
            snapshots = list(query.limit(limit).stream(timeout=self._deadline_s))
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore query failed: {exc}") from exc
        return [from_document(s.id, s.to_dict()) for s in snapshots]

    def delete(self, job: Job) -> bool:
        ref = self._jobs.document(job.id)

        @firestore.transactional
        def run(transaction: Any) -> bool:
            snapshot = ref.get(transaction=transaction)
            data = snapshot.to_dict() if snapshot.exists else None
            if data is None:
                return False
            stored = from_document(snapshot.id, data)
            if stored.updated_at != job.updated_at or not stored.status.is_final:
                return False
            transaction.delete(ref)
            change = tally_removal(stored)
            if change is not None:
                self._tally.add(transaction, change)
            return True

        try:
            return bool(run(self._client.transaction()))
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore delete failed: {exc}") from exc

    def forget_events(self, event_ids: list[str]) -> int:
        forgotten = 0
        # Document ids as FirestoreProcessedEvents names them: "<subscriber>:<event id>".
        ids = {f"{s}:{e}".replace("/", "_") for s in RECORDING_SUBSCRIBERS for e in event_ids}
        try:
            for start in range(0, len(event_ids), IN_LIMIT):
                chunk = event_ids[start : start + IN_LIMIT]
                query = self._processed.where(filter=firestore.FieldFilter("event_id", "in", chunk))
                for snapshot in query.stream(timeout=self._deadline_s):
                    ids.add(snapshot.id)
                    if not is_tombstone(snapshot.get("record") or {}):
                        forgotten += 1
            expires = datetime.now(UTC) + self._processed_ttl
            ordered = sorted(ids)
            for start in range(0, len(ordered), BATCH_WRITES):
                batch = self._client.batch()
                for doc_id in ordered[start : start + BATCH_WRITES]:
                    subscriber, _, event_id = doc_id.partition(":")
                    tombstone = {
                        "subscriber": subscriber,
                        "event_id": event_id,
                        "record": TOMBSTONE,
                        TTL_FIELD: expires,
                        SERVER_CREATED_FIELD: firestore.SERVER_TIMESTAMP,
                    }
                    batch.set(self._processed.document(doc_id), tombstone)
                batch.commit(timeout=self._deadline_s)
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore write failed: {exc}") from exc
        return forgotten
