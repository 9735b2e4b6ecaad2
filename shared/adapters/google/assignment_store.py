"""Assignments on Firestore: one document each, sharded tallies, AssignmentGraded records.

A round's tally is spread over `TALLY_SHARDS` documents that the job store's own write
(the job's create batch, or its update transaction) increments blindly, so a job's status
and its assignment's counts commit together and no write reads a counter. Progress reads
the shards in one call: a constant number of reads whatever the class size.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import datetime
from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import firestore
from google.cloud.firestore_v1.base_query import And, Or

from shared.adapters.google import metering
from shared.adapters.google.clients import DEFAULT_DEADLINE_S, bounded_retry
from shared.adapters.google.firestore_codec import plain
from shared.domain.assignment import Assignment, Tally, TallyChange, tally_change
from shared.domain.client_ids import USER_SCOPE_MARK
from shared.domain.errors import AssignmentNotFound, DependencyUnavailable, GradeqError
from shared.domain.events import AssignmentGraded
from shared.domain.job import Job

#: Documents one round's tally is spread over (Firestore sustains about one write a
#: second per document; completions of a class land on random shards).
TALLY_SHARDS = 16


def _from_document(data: dict[str, Any]) -> Assignment:
    record = dict(data)
    for key in ("created_at", "updated_at"):
        record[key] = plain(record[key])
    record["rubrics"] = [
        {**r, "created_at": plain(r["created_at"])} for r in record.get("rubrics") or ()
    ]
    return Assignment.from_record(record)


def _shard_id(assignment_id: str, round_: int, shard: int) -> str:
    return f"{assignment_id}:{round_}:{shard}"


class FirestoreTally:
    """Adds a job write's tally change to one random shard, in that write's commit."""

    def __init__(self, client: firestore.Client, collection: str) -> None:
        self._tallies = client.collection(collection)

    def record(self, writes: Any, before: Job | None, after: Job) -> None:
        change = tally_change(before, after)
        if change is not None:
            self.add(writes, change)

    def add(self, writes: Any, change: TallyChange) -> None:
        shard = random.randrange(TALLY_SHARDS)
        ref = self._tallies.document(_shard_id(change.assignment_id, change.round, shard))
        fields = {name: firestore.Increment(delta) for name, delta in change.deltas.items()}
        writes.set(ref, fields, merge=True)


class FirestoreAssignmentStore:
    """The AssignmentStore port on Firestore (see docs/assignments.md for costs)."""

    def __init__(
        self,
        client: firestore.Client,
        collection: str = "assignments",
        tallies_collection: str = "assignment_tallies",
        graded_collection: str = "assignment_graded",
        deadline_s: float = DEFAULT_DEADLINE_S,
    ) -> None:
        self._client = client
        self._assignments = client.collection(collection)
        self._tallies = client.collection(tallies_collection)
        self._graded = client.collection(graded_collection)
        self._retry = bounded_retry(deadline_s)
        self._deadline_s = deadline_s
        self.meter = metering.Meter()

    def _call(self, what: str, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except (GradeqError, gexc.AlreadyExists):  # the callers' own outcomes
            raise
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore {what} failed: {exc}") from exc

    def create(self, assignment: Assignment) -> tuple[Assignment, bool]:
        ref = self._assignments.document(assignment.id)
        self.meter.add(metering.FIRESTORE_WRITES)
        try:
            self._call(
                "create assignment",
                lambda: ref.create(
                    assignment.to_record(), retry=self._retry, timeout=self._deadline_s
                ),
            )
        except gexc.AlreadyExists:
            existing = self.get(assignment.id)
            if existing is None:
                raise DependencyUnavailable(
                    f"assignment {assignment.id} exists but cannot be read"
                ) from None
            return existing, False
        return assignment, True

    def get(self, assignment_id: str) -> Assignment | None:
        self.meter.add(metering.FIRESTORE_READS)
        snapshot = self._call(
            "read assignment",
            lambda: self._assignments.document(assignment_id).get(
                retry=self._retry, timeout=self._deadline_s
            ),
        )
        return _from_document(snapshot.to_dict() or {}) if snapshot.exists else None

    def list_of(
        self, client_id: str, limit: int, after: tuple[datetime, str] | None = None
    ) -> list[Assignment]:
        # Needs the composite index (client_id ASC, created_at DESC, __name__ DESC), and for
        # the school's users' assignments made before objects had an author (client id
        # `<school>:user:<uid>`, a range) (created_at DESC, client_id DESC, __name__ DESC).
        legacy = client_id + USER_SCOPE_MARK
        users = And(
            [
                firestore.FieldFilter("client_id", ">=", legacy),
                firestore.FieldFilter("client_id", "<", legacy[:-1] + chr(ord(legacy[-1]) + 1)),
            ]
        )
        school = firestore.FieldFilter("client_id", "==", client_id)
        query: Any = (
            self._assignments.where(filter=Or([school, users]))
            .order_by("created_at", direction=firestore.Query.DESCENDING)
            .order_by("client_id", direction=firestore.Query.DESCENDING)
            .order_by("__name__", direction=firestore.Query.DESCENDING)
        )
        if after is not None:
            last = self._assignments.document(after[1])
            stored = self._call(
                "list assignments",
                lambda: last.get(
                    field_paths=["client_id"], retry=self._retry, timeout=self._deadline_s
                ),
            )
            self.meter.add(metering.FIRESTORE_READS)
            last_client = (stored.to_dict() or {}).get("client_id") if stored.exists else None
            query = query.start_after(
                {
                    "created_at": after[0],
                    "client_id": last_client if isinstance(last_client, str) else client_id,
                    "__name__": last,
                }
            )
        snapshots = self._call(
            "list assignments",
            lambda: list(query.limit(limit).stream(retry=self._retry, timeout=self._deadline_s)),
        )
        self.meter.add(metering.FIRESTORE_QUERIES)
        self.meter.add(metering.FIRESTORE_READS, max(1, len(snapshots)))
        return [_from_document(s.to_dict()) for s in snapshots]

    def update(self, assignment_id: str, mutate: Callable[[Assignment], Assignment]) -> Assignment:
        ref = self._assignments.document(assignment_id)

        @firestore.transactional
        def apply(transaction: firestore.Transaction) -> Assignment:
            snapshot = ref.get(transaction=transaction, retry=self._retry, timeout=self._deadline_s)
            if not snapshot.exists:
                raise AssignmentNotFound(f"no assignment {assignment_id}")
            updated = mutate(_from_document(snapshot.to_dict() or {}))
            transaction.set(ref, updated.to_record())
            return updated

        result: Assignment = self._call(
            "update assignment", lambda: apply(self._client.transaction())
        )
        self.meter.add(metering.FIRESTORE_READS)
        self.meter.add(metering.FIRESTORE_WRITES)
        return result

    def tally(self, assignment_id: str, round_: int) -> Tally:
        refs = [
            self._tallies.document(_shard_id(assignment_id, round_, i)) for i in range(TALLY_SHARDS)
        ]
        snapshots = self._call(
            "read tally",
            lambda: list(self._client.get_all(refs, retry=self._retry, timeout=self._deadline_s)),
        )
        self.meter.add(metering.FIRESTORE_READS, TALLY_SHARDS)
        fields: dict[str, float] = {}
        for snapshot in snapshots:
            for name, value in (snapshot.to_dict() or {}).items() if snapshot.exists else ():
                fields[name] = fields.get(name, 0) + value
        return Tally.from_fields(fields)

    def record_graded(self, event: AssignmentGraded) -> bool:
        ref = self._graded.document(event.event_id)
        document = {
            "published": False,
            "recorded_at": event.occurred_at,
            "occurred_at": event.occurred_at,
            "data": event.data(),
        }
        self.meter.add(metering.FIRESTORE_WRITES)
        try:
            # create() is the race's referee: one caller's precondition holds.
            self._call(
                "record assignment graded",
                lambda: ref.create(document, retry=self._retry, timeout=self._deadline_s),
            )
        except gexc.AlreadyExists:
            return False
        return True

    def mark_graded_published(self, event_id: str) -> None:
        self.meter.add(metering.FIRESTORE_WRITES)
        self._call(
            "mark assignment graded",
            lambda: self._graded.document(event_id).update(
                {"published": True}, retry=self._retry, timeout=self._deadline_s
            ),
        )

    def waiting_regrades(self, limit: int) -> list[Assignment]:
        # One equality filter: the automatic single-field index serves it.
        query = self._assignments.where(
            filter=firestore.FieldFilter("regrade_waiting", "==", True)
        ).limit(limit)
        snapshots = self._call(
            "find waiting regrades",
            lambda: list(query.stream(retry=self._retry, timeout=self._deadline_s)),
        )
        self.meter.add(metering.FIRESTORE_QUERIES)
        self.meter.add(metering.FIRESTORE_READS, max(1, len(snapshots)))
        return [_from_document(s.to_dict()) for s in snapshots]

    def unpublished_graded(self, limit: int) -> list[AssignmentGraded]:
        # Needs the composite index (published ASC, recorded_at ASC).
        query = (
            self._graded.where(filter=firestore.FieldFilter("published", "==", False))
            .order_by("recorded_at")
            .limit(limit)
        )
        snapshots = self._call(
            "find unpublished assignment events",
            lambda: list(query.stream(retry=self._retry, timeout=self._deadline_s)),
        )
        self.meter.add(metering.FIRESTORE_QUERIES)
        self.meter.add(metering.FIRESTORE_READS, max(1, len(snapshots)))
        return [
            AssignmentGraded.from_data(s.id, plain(s.get("occurred_at")), s.get("data"))
            for s in snapshots
        ]

    def ping(self) -> None:
        self._call("ping", lambda: self._assignments.document("_ping").get(retry=None, timeout=5.0))
