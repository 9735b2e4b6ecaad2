"""JobStore on Firestore: one document per job, named by the job id.

Creation is one atomic batch: the job's `create()` (insert-if-absent) with +1 on its
client's counter and on one backlog shard of jobs not yet final. Every state change is one
transaction that reads the document, applies the domain method and writes it back (one
read, one write; never a read after a write), with -1 on the counters when the job first
becomes final.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, TypeVar

from google.api_core import exceptions as gexc
from google.cloud import firestore

from shared.adapters.google import metering
from shared.adapters.google.clients import DEFAULT_DEADLINE_S, bounded_retry
from shared.adapters.google.firestore_codec import from_document, to_document
from shared.domain.admission import ActiveCounts, AdmissionLimits, counted_as
from shared.domain.errors import DependencyUnavailable, GradeqError, JobNotFound
from shared.domain.job import FINAL_STATUSES, Job, JobStatus
from shared.ports import JobCursor, JobFilter, JobQuery

#: Whole transactions retried when a read is aborted under contention (the client
#: itself only retries ABORTED at commit).
_ABORTED_READ_RETRIES = 3
#: The statuses find_unannounced asks for (a Firestore `in` filter).
_FINAL = sorted(s.value for s in FINAL_STATUSES)
#: A readiness probe answers within this, without the client's long default retries.
PING_TIMEOUT_S = 5.0
_T = TypeVar("_T")
#: The total of jobs not yet final is spread over this many counter documents, so
#: creates and completions do not all write one document (Firestore sustains about one
#: write a second per document); the total is their sum.
BACKLOG_SHARDS = 8
#: How long one instance reuses the total it read. Both ceilings are read before the
#: create, not inside a transaction (which would serialise every create of a client), so
#: concurrent creates may pass a ceiling by the number racing: a soft limit.
BACKLOG_CACHE_S = 1.0
_ACTIVE = "active"


#: Called with each job write's batch or transaction, the job before (None: created) and
#: after, to add blind writes to the same commit (an assignment's tally).
WriteHook = Callable[[Any, Job | None, Job], None]


def _client_counter_id(client_id: str) -> str:
    return "client:" + counted_as(client_id).replace("/", "%2F")


class FirestoreJobStore:
    """Jobs in one Firestore collection; see docs/cost.md for indexes and TTL."""

    def __init__(
        self,
        client: firestore.Client,
        collection: str,
        ttl: timedelta,
        deadline_s: float = DEFAULT_DEADLINE_S,
        counters_collection: str | None = None,
        on_write: WriteHook | None = None,
    ) -> None:
        self._on_write = on_write
        self._client = client
        self._jobs = client.collection(collection)
        self._counters = client.collection(counters_collection or f"{collection}_counters")
        self._backlog_cache: tuple[float, int] | None = None
        self._cache_lock = threading.Lock()
        self._ttl = ttl
        # Every call is bounded; only BeginTransaction keeps the client's own retry (the
        # library offers no knob for it), so an update waits longer on a dead store.
        self._retry = bounded_retry(deadline_s)
        self._deadline_s = deadline_s
        self.meter = metering.Meter()

    def create(self, job: Job, limits: AdmissionLimits | None = None) -> tuple[Job, bool]:
        ref = self._jobs.document(job.id)
        client_ref = self._counters.document(_client_counter_id(job.client_id))
        if limits is not None:
            try:
                limits.check(self._admission_counts(client_ref))
            except GradeqError:
                existing = self.get(job.id)  # a retried request is answered, never refused
                if existing is not None:
                    return existing, False
                raise
        # One atomic batch: the job's create() precondition fails the whole batch when the
        # id exists, so the counters move only with a new job (no read locks taken).
        batch = self._client.batch()
        batch.create(ref, to_document(job, self._ttl, created=True))
        self._count(batch, client_ref, +1)
        if self._on_write is not None:
            self._on_write(batch, None, job)
        try:
            batch.commit(retry=self._retry, timeout=self._deadline_s)
        except gexc.AlreadyExists:
            # A concurrent or earlier request with the same key won: answer with its job.
            existing = self.get(job.id)
            if existing is None:  # expired and deleted by TTL in between: a rare retry
                return self.create(job, limits)
            return existing, False
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore create failed: {exc}") from exc
        finally:
            self.meter.add(metering.FIRESTORE_WRITES, 3)
        return job, True

    def _read_active(self, client_ref: Any) -> int:
        try:
            counter = client_ref.get(retry=self._retry, timeout=self._deadline_s)
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore get failed: {exc}") from exc
        self.meter.add(metering.FIRESTORE_READS)
        return int((counter.to_dict() or {}).get(_ACTIVE, 0)) if counter.exists else 0

    def _count(self, writes: Any, client_ref: Any, delta: int) -> None:
        """Add `delta` to the client's counter and one backlog shard in `writes` (blind)."""
        increment = {_ACTIVE: firestore.Increment(delta)}
        writes.set(client_ref, increment, merge=True)
        shard = self._counters.document(f"backlog:{random.randrange(BACKLOG_SHARDS)}")
        writes.set(shard, increment, merge=True)

    def _admission_counts(self, client_ref: Any) -> ActiveCounts:
        """The client's count, read now, and the backlog total, cached for a while."""
        now = time.monotonic()
        with self._cache_lock:
            cached = self._backlog_cache
        if cached and now - cached[0] < BACKLOG_CACHE_S:
            return ActiveCounts(self._read_active(client_ref), cached[1])
        return self._read_counts(client_ref)

    def _read_counts(self, client_ref: Any) -> ActiveCounts:
        """Read the client's counter and every backlog shard in one call; cache the total."""
        now = time.monotonic()
        shards = [self._counters.document(f"backlog:{i}") for i in range(BACKLOG_SHARDS)]
        try:
            snapshots = list(
                self._client.get_all(
                    [client_ref, *shards], retry=self._retry, timeout=self._deadline_s
                )
            )
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore read failed: {exc}") from exc
        self.meter.add(metering.FIRESTORE_READS, 1 + BACKLOG_SHARDS)
        # The snapshots come back in any order: tell them apart by document id.
        active = {s.id: int((s.to_dict() or {}).get(_ACTIVE, 0)) for s in snapshots if s.exists}
        total = sum(active.get(shard.id, 0) for shard in shards)
        with self._cache_lock:
            self._backlog_cache = (now, total)
        return ActiveCounts(active.get(client_ref.id, 0), total)

    def active_jobs_of(self, client_id: str) -> int:
        return self._read_active(self._counters.document(_client_counter_id(client_id)))

    def active_counts(self, client_id: str) -> ActiveCounts:
        return self._read_counts(self._counters.document(_client_counter_id(client_id)))

    def get(self, job_id: str) -> Job | None:
        self.meter.add(metering.FIRESTORE_READS)
        try:
            snapshot = self._jobs.document(job_id).get(retry=self._retry, timeout=self._deadline_s)
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore get failed: {exc}") from exc
        return from_document(job_id, snapshot.to_dict() or {}) if snapshot.exists else None

    def update(self, job_id: str, mutate: Callable[[Job], Job]) -> Job:
        ref = self._jobs.document(job_id)

        @firestore.transactional
        def apply(transaction: firestore.Transaction) -> tuple[Job, bool]:
            self.meter.add(metering.FIRESTORE_TRANSACTIONS)
            self.meter.add(metering.FIRESTORE_READS)
            snapshot = ref.get(transaction=transaction, retry=self._retry, timeout=self._deadline_s)
            if not snapshot.exists:
                raise JobNotFound(f"no job {job_id}")
            # A domain error raised here rolls the transaction back: nothing is written.
            current = from_document(job_id, snapshot.to_dict() or {})
            updated = mutate(current)
            document = to_document(updated, self._ttl, created=False)
            # Replace each job field whole but keep server_created_at from the create.
            transaction.set(ref, document, merge=list(document))
            finalized = updated.status.is_final and not current.status.is_final
            reopened = current.status.is_final and not updated.status.is_final
            if finalized or reopened:  # a replay or regrade counts as not final again
                client_ref = self._counters.document(_client_counter_id(updated.client_id))
                self._count(transaction, client_ref, -1 if finalized else +1)
            if self._on_write is not None:
                self._on_write(transaction, current, updated)
            return updated, finalized

        result: Job
        finalized: bool
        result, finalized = self._run(lambda: apply(self._client.transaction()), job_id)
        # Counted once committed: the writes of an aborted attempt are not billed.
        self.meter.add(metering.FIRESTORE_WRITES, 3 if finalized else 1)
        return result

    def _run(self, attempt_once: Callable[[], _T], job_id: str) -> _T:
        """Run a transaction, retrying aborted reads; map failures to DependencyUnavailable."""
        for attempt in range(_ABORTED_READ_RETRIES + 1):
            try:
                return attempt_once()
            except GradeqError:
                raise
            except gexc.Aborted as exc:
                if attempt == _ABORTED_READ_RETRIES:
                    raise DependencyUnavailable(f"Firestore contention on {job_id}") from exc
                time.sleep(0.05 * 2**attempt)
            except ValueError as exc:
                # The client wraps ABORTED in ValueError once its commit retries run out,
                # and raises one while rolling back a transaction that never began.
                if isinstance(exc.__cause__, gexc.Aborted):
                    raise DependencyUnavailable(f"Firestore contention on {job_id}") from exc
                if isinstance(exc.__context__, gexc.GoogleAPIError):
                    raise DependencyUnavailable(f"Firestore update failed: {exc}") from exc
                raise
            except gexc.GoogleAPIError as exc:
                raise DependencyUnavailable(f"Firestore update failed: {exc}") from exc
        raise AssertionError("unreachable")

    def find(
        self,
        status: JobStatus,
        updated_before: datetime,
        limit: int,
        updated_after: datetime | None = None,
    ) -> list[Job]:
        # Needs the composite index (status ASC, updated_at ASC): see docs/cost.md.
        query = self._jobs.where(filter=firestore.FieldFilter("status", "==", status.value))
        query = query.where(filter=firestore.FieldFilter("updated_at", "<", updated_before))
        if updated_after is not None:
            query = query.where(filter=firestore.FieldFilter("updated_at", ">", updated_after))
        return self._query(query.order_by("updated_at").limit(limit))

    def find_unannounced(self, updated_before: datetime, limit: int) -> list[Job]:
        # Needs the composite index (event_published ASC, status ASC, updated_at ASC).
        query = (
            self._jobs.where(filter=firestore.FieldFilter("event_published", "==", False))
            .where(filter=firestore.FieldFilter("status", "in", _FINAL))
            .where(filter=firestore.FieldFilter("updated_at", "<", updated_before))
            .order_by("updated_at")
            .limit(limit)
        )
        return self._query(query)

    def find_jobs(self, where: JobFilter, limit: int, after: JobCursor | None = None) -> list[Job]:
        # Each equality filter needs the composite index (<field> ASC, created_at DESC);
        # Firestore merges them when several are combined (see docs/operations.md).
        query: Any = self._jobs
        for field_path, value in (
            ("status", where.status.value if where.status else None),
            ("client_id", where.client_id),
            ("request.assignment_id", where.assignment_id),
        ):
            if value is not None:
                query = query.where(filter=firestore.FieldFilter(field_path, "==", value))
        if where.created_from is not None:
            query = query.where(
                filter=firestore.FieldFilter("created_at", ">=", where.created_from)
            )
        if where.created_to is not None:
            query = query.where(filter=firestore.FieldFilter("created_at", "<", where.created_to))
        query = query.order_by("created_at", direction=firestore.Query.DESCENDING).order_by(
            "__name__", direction=firestore.Query.DESCENDING
        )
        if after is not None:
            query = query.start_after(
                {"created_at": after.created_at, "__name__": self._jobs.document(after.job_id)}
            )
        return self._query(query.limit(limit))

    def count_by_status(self, cap: int) -> dict[JobStatus, int]:
        # One aggregation per status over the automatic single-field index; a count is
        # billed one read per 1,000 index entries, so `cap` bounds the cost.
        counts: dict[JobStatus, int] = {}
        for status in JobStatus:
            query: Any = self._jobs.where(
                filter=firestore.FieldFilter("status", "==", status.value)
            ).limit(cap)
            try:
                results: Any = query.count(alias="n").get(
                    retry=self._retry, timeout=self._deadline_s
                )
            except gexc.GoogleAPIError as exc:
                raise DependencyUnavailable(f"Firestore count failed: {exc}") from exc
            n = int(results[0][0].value)
            counts[status] = n
            self.meter.add(metering.FIRESTORE_QUERIES)
            self.meter.add(metering.FIRESTORE_READS, max(1, -(-n // 1000)))
        return counts

    def completed_between(self, since: datetime, until: datetime, limit: int) -> list[Job]:
        # A range and an order on one field: the automatic single-field index serves it.
        query = (
            self._jobs.where(filter=firestore.FieldFilter("completed_at", ">=", since))
            .where(filter=firestore.FieldFilter("completed_at", "<", until))
            .order_by("completed_at", direction=firestore.Query.DESCENDING)
            .limit(limit)
        )
        return self._query(query)

    def _query(self, query: Any) -> list[Job]:
        try:
            snapshots: list[Any] = list(query.stream(retry=self._retry, timeout=self._deadline_s))
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore query failed: {exc}") from exc
        self.meter.add(metering.FIRESTORE_QUERIES)
        # A query is billed one read per document returned, and at least one.
        self.meter.add(metering.FIRESTORE_READS, max(1, len(snapshots)))
        return [from_document(s.id, s.to_dict()) for s in snapshots]

    def list_jobs(self, query: JobQuery) -> list[Job]:
        # Needs composite indexes on (client_id, [status,] [request.submission_id,]
        # created_at DESC, __name__ DESC): one per combination of filters.
        q: Any = self._jobs.where(filter=firestore.FieldFilter("client_id", "==", query.client_id))
        if query.status is not None:
            q = q.where(filter=firestore.FieldFilter("status", "==", query.status.value))
        if query.submission_id is not None:
            q = q.where(
                filter=firestore.FieldFilter("request.submission_id", "==", query.submission_id)
            )
        q = q.order_by("created_at", direction=firestore.Query.DESCENDING).order_by(
            "__name__", direction=firestore.Query.DESCENDING
        )
        if query.after is not None:
            created_at, job_id = query.after
            q = q.start_after({"created_at": created_at, "__name__": self._jobs.document(job_id)})
        try:
            snapshots: list[Any] = list(
                q.limit(query.limit).stream(retry=self._retry, timeout=self._deadline_s)
            )
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore query failed: {exc}") from exc
        self.meter.add(metering.FIRESTORE_QUERIES)
        self.meter.add(metering.FIRESTORE_READS, max(1, len(snapshots)))
        return [from_document(s.id, s.to_dict()) for s in snapshots]

    def ping(self) -> None:
        try:
            # One document read (of a name no job can have) proves reachability and rights.
            self._jobs.document("_ping").get(retry=None, timeout=PING_TIMEOUT_S)
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore unreachable: {exc}") from exc
