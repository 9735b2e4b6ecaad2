"""JobStore on Firestore: one document per job, named by the job id; no transactions.

Every write is a compare-and-set: it names the version of the document it was decided on
(the `update_time` Firestore returned when it was read or last written), and Firestore
refuses it with FAILED_PRECONDITION when another writer got there first. The loser reads
the job again and decides again, so concurrent deliveries never abort each other inside
a transaction, a writer that dies between its read and its write leaves nothing locked,
and a change is one commit (plus one read when this instance has not seen the job's
latest version: `_Versions`).

Jobs not yet final are counted in backlog shards: a client's jobs always in the same
shard (`shard_of`), which holds the shard's total and each of its clients' counts, so
one document answers both ceilings. Creation is one atomic batch: the job's `create()`
(insert-if-absent) with +1 on the shard's total and on the client's count. With
admission limits the shard is written conditioned on the version the check read, so a
ceiling holds under any number of racing creates. A job's first final state is one batch
too: the job (conditioned on its version) with -1 on both, blind.
"""

from __future__ import annotations

import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import firestore
from google.cloud.firestore_v1.base_query import And, Or

from shared.adapters.google import backlog_shards, metering
from shared.adapters.google.backlog_shards import (
    BACKLOG_SHARDS,
    Shard,
    shard_capacity,
    shard_id,
    shard_of,
)
from shared.adapters.google.clients import DEFAULT_DEADLINE_S, bounded_retry
from shared.adapters.google.firestore_codec import from_document, to_document
from shared.domain.admission import ActiveCounts, AdmissionLimits
from shared.domain.authorization import Owner
from shared.domain.client_ids import USER_SCOPE_MARK
from shared.domain.errors import DependencyUnavailable, GradeqError, JobNotFound
from shared.domain.job import Job
from shared.domain.status import FINAL_STATUSES, JobStatus
from shared.ports import Admission, JobCursor, JobFilter, JobQuery

#: The statuses find_unannounced asks for (a Firestore `in` filter).
_FINAL = sorted(s.value for s in FINAL_STATUSES)
#: A readiness probe answers within this, without the client's long default retries.
PING_TIMEOUT_S = 5.0
__all__ = ["BACKLOG_SHARDS", "FirestoreJobStore", "shard_capacity"]

#: The field of a job document naming the backlog shard that counts it.
SHARD_FIELD = "backlog_shard"
#: How many job versions one instance remembers (a job's id and its last version each).
VERSIONS_KEPT = 4096


#: Called with each job write's batch or transaction, the job before (None: created) and
#: after, to add blind writes to the same commit (an assignment's tally).
WriteHook = Callable[[Any, Job | None, Job], None]


@dataclass(frozen=True)
class _Version:
    """A job as this instance last read or wrote it, and Firestore's version of it."""

    job: Job
    update_time: Any
    shard: int | None


class _Versions:
    """The latest version of recently seen jobs, so a change needs no read first.

    Only a hint: a write names the version it was decided on, so a stale entry costs one
    refused write and a read, never a lost update.
    """

    def __init__(self, size: int = VERSIONS_KEPT) -> None:
        self._size = size
        self._entries: OrderedDict[str, _Version] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, job_id: str) -> _Version | None:
        with self._lock:
            return self._entries.get(job_id)

    def put(self, job_id: str, version: _Version) -> None:
        with self._lock:
            self._entries[job_id] = version
            self._entries.move_to_end(job_id)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def forget(self, job_id: str) -> None:
        with self._lock:
            self._entries.pop(job_id, None)


class Contended:
    """Jittered pauses between compare-and-set attempts, within the store's deadline."""

    def __init__(self, deadline_s: float, what: str) -> None:
        self._give_up = time.monotonic() + deadline_s
        self._what = what
        self._losses = 0

    def lost(self) -> None:
        """Another writer won: pause a little (longer each time), or give up."""
        self._losses += 1
        if time.monotonic() >= self._give_up:
            raise DependencyUnavailable(f"{self._what} kept changing; try again")
        if self._losses > 1:
            time.sleep(random.uniform(0, min(0.1, 0.005 * 2**self._losses)))


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
        self._ttl = ttl
        # Every call is bounded: a dead store answers within the deadline.
        self._retry = bounded_retry(deadline_s)
        self._deadline_s = deadline_s
        self._versions = _Versions()
        self.meter = metering.Meter()

    @property
    def deadline_s(self) -> float:
        """How long one of this store's calls may take, retries included."""
        return self._deadline_s

    # --- creating ------------------------------------------------------------------------

    def create(self, job: Job, limits: AdmissionLimits | None = None) -> tuple[Job, bool]:
        admission = self._admit(job, limits, count=limits is not None)
        return admission.job, admission.created

    def admit(self, job: Job, limits: AdmissionLimits | None = None) -> Admission:
        return self._admit(job, limits, count=True)

    def _admit(self, job: Job, limits: AdmissionLimits | None, *, count: bool) -> Admission:
        ref = self._jobs.document(job.id)
        shard = shard_of(job.client_id, limits.backlog if limits else None)
        shard_ref = self._shard(shard)
        contended = Contended(self._deadline_s, f"the job counters of {job.client_id}")
        while True:
            batch = self._client.batch()
            ahead = 0
            seen: Shard | None = None  # the shard as checked; None: counted blind
            donor: tuple[Shard, int] | None = None
            if count:
                read = Shard(shard, self._get_all([shard_ref])[shard_ref.id])
                ahead = read.of_client(job.client_id)
                if limits is not None:
                    try:
                        donor = self._check(limits, read, job.client_id)
                    except GradeqError:
                        existing = self.get(job.id)  # a retried request is answered, never refused
                        if existing is not None:
                            return Admission(existing, False, ahead)
                        raise
                    seen = read
            document = to_document(job, self._ttl, created=True)
            document[SHARD_FIELD] = shard
            # One atomic batch: the job's create() precondition fails the whole batch when
            # the id exists, so the counts move only with a new job.
            batch.create(ref, document)
            if seen is None:
                backlog_shards.count(batch, shard_ref, job.client_id, +1)
            else:
                # Conditioned on the counts just checked: a racing create makes this batch
                # fail, and it is decided again on the new counts.
                moved = donor[1] if donor else 0
                backlog_shards.count_checked(
                    batch, self._client, shard_ref, seen, job.client_id, +1, moved
                )
                if donor is not None:
                    giver = donor[0]
                    backlog_shards.adjust_checked(
                        batch, self._client, self._shard(giver.index), giver, -moved
                    )
            if self._on_write is not None:
                self._on_write(batch, None, job)
            try:
                results = batch.commit(retry=self._retry, timeout=self._deadline_s)
            except gexc.AlreadyExists:
                # A concurrent or earlier request with the same key won: answer with its job.
                existing = self.get(job.id)
                if existing is not None:
                    return Admission(existing, False, ahead)
                # Expired and deleted by TTL in between, or a racing create made the shard
                # document this batch meant to create: a rare retry.
                contended.lost()
            except gexc.FailedPrecondition:
                contended.lost()  # a shard moved since it was read
            except gexc.GoogleAPIError as exc:
                raise DependencyUnavailable(f"Firestore create failed: {exc}") from exc
            else:
                self._versions.put(job.id, _Version(job, results[0].update_time, shard))
                return Admission(job, True, ahead)
            finally:
                # Counted per attempt, refused ones included, to be safe.
                self.meter.add(metering.FIRESTORE_WRITES, 2 if donor is None else 3)

    def _shard(self, shard: int) -> Any:
        return self._counters.document(shard_id(shard))

    def _check(
        self, limits: AdmissionLimits, seen: Shard, client_id: str
    ) -> tuple[Shard, int] | None:
        """Raise past a ceiling; else the shard to take capacity from, if the job needs it."""
        limits.check(ActiveCounts(seen.of_client(client_id), 0))  # the client's ceiling
        needed = 1 - seen.room(limits.backlog)
        if needed <= 0:
            return None
        # The client's shard is full: look at the others (more reads, only when the backlog
        # is near its ceiling or this client's shard is busy), and take capacity from one.
        others = [s for s in range(BACKLOG_SHARDS) if s != seen.index]
        snapshots = self._get_all([self._shard(s) for s in others])
        shards = [Shard(s, snapshots[shard_id(s)]) for s in others]
        donor = backlog_shards.donor_for(shards, needed, limits.backlog)
        if donor is None:
            # No shard has room to give: the backlog is at its ceiling.
            limits.check(ActiveCounts(seen.of_client(client_id), limits.backlog))
            raise AssertionError("unreachable: a full backlog fails the check")
        return donor

    def _get_all(self, refs: Sequence[Any]) -> dict[str, Any]:
        """Read documents in one call; the snapshots by document id (they come in any order)."""
        try:
            snapshots = list(
                self._client.get_all(list(refs), retry=self._retry, timeout=self._deadline_s)
            )
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore read failed: {exc}") from exc
        self.meter.add(metering.FIRESTORE_READS, len(refs))
        return {s.id: s for s in snapshots}

    # --- counters ------------------------------------------------------------------------

    def _shards(self) -> list[Shard]:
        refs = [self._shard(s) for s in range(BACKLOG_SHARDS)]
        snapshots = self._get_all(refs)
        return [Shard(s, snapshots[ref.id]) for s, ref in enumerate(refs)]

    def active_jobs_of(self, client_id: str) -> int:
        return self.active_counts(client_id).client

    def active_counts(self, client_id: str) -> ActiveCounts:
        # Every shard: a client's jobs are all in its own shard unless the backlog ceiling
        # changed across 8 (`shards_in_use`); the sum is right either way.
        shards = self._shards()
        client = sum(s.of_client(client_id) for s in shards)
        return ActiveCounts(client, sum(s.active for s in shards))

    # --- reading and changing one job ----------------------------------------------------

    def _read(self, job_id: str) -> _Version | None:
        self.meter.add(metering.FIRESTORE_READS)
        try:
            snapshot = self._jobs.document(job_id).get(retry=self._retry, timeout=self._deadline_s)
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore get failed: {exc}") from exc
        if not snapshot.exists:
            self._versions.forget(job_id)
            return None
        data = snapshot.to_dict() or {}
        shard = data.get(SHARD_FIELD)
        version = _Version(
            from_document(job_id, data),
            snapshot.update_time,
            shard if isinstance(shard, int) else None,
        )
        self._versions.put(job_id, version)
        return version

    def get(self, job_id: str) -> Job | None:
        version = self._read(job_id)
        return version.job if version is not None else None

    def update(self, job_id: str, mutate: Callable[[Job], Job]) -> Job:
        return self._change(job_id, mutate, None)

    def reopen(self, job_id: str, mutate: Callable[[Job], Job], limits: AdmissionLimits) -> Job:
        return self._change(job_id, mutate, limits)

    def _change(
        self, job_id: str, mutate: Callable[[Job], Job], limits: AdmissionLimits | None
    ) -> Job:
        ref = self._jobs.document(job_id)
        contended = Contended(self._deadline_s, f"job {job_id}")
        version = self._versions.get(job_id)
        while True:
            fresh = version is None
            if version is None:
                version = self._read(job_id)
                if version is None:
                    raise JobNotFound(f"no job {job_id}")
            current = version.job
            try:
                updated = mutate(current)
            except GradeqError:
                if fresh:
                    raise  # decided on the job as it is now: nothing is written
                version = None  # the version remembered may be stale: decide on a read
                continue
            finalized = updated.status.is_final and not current.status.is_final
            reopened = current.status.is_final and not updated.status.is_final
            document = to_document(updated, self._ttl, created=False)
            shard = version.shard if version.shard is not None else shard_of(updated.client_id)
            seen: Shard | None = None  # the client's shard as checked; None: counted blind
            donor: tuple[Shard, int] | None = None
            if reopened and limits is not None:
                if not fresh:
                    version = None  # admitted on the job and the counts as they are now
                    continue
                # Counted again where a new job of the client is, checked like a create.
                shard = shard_of(updated.client_id, limits.backlog)
                seen = Shard(shard, self._get_all([self._shard(shard)])[shard_id(shard)])
                donor = self._check(limits, seen, updated.client_id)  # raises past a ceiling
                document[SHARD_FIELD] = shard
            batch = self._client.batch()
            # Replaces each job field whole; server_created_at and the shard stay.
            option = self._client.write_option(last_update_time=version.update_time)
            batch.update(ref, document, option=option)
            if seen is not None:
                moved = donor[1] if donor else 0
                backlog_shards.count_checked(
                    batch, self._client, self._shard(shard), seen, updated.client_id, +1, moved
                )
                if donor is not None:
                    giver = donor[0]
                    backlog_shards.adjust_checked(
                        batch, self._client, self._shard(giver.index), giver, -moved
                    )
            elif finalized or reopened:  # a replay or regrade counts as not final again
                delta = -1 if finalized else +1
                backlog_shards.count(batch, self._shard(shard), updated.client_id, delta)
            if self._on_write is not None:
                self._on_write(batch, current, updated)
            try:
                results = batch.commit(retry=self._retry, timeout=self._deadline_s)
            except gexc.FailedPrecondition:
                # Another writer changed the job since this version: decide again on it.
                self._versions.forget(job_id)
                version = None
                if fresh:
                    contended.lost()
                continue
            except gexc.GoogleAPIError as exc:
                self._versions.forget(job_id)  # the write may or may not have happened
                raise DependencyUnavailable(f"Firestore update failed: {exc}") from exc
            finally:
                self.meter.add(metering.FIRESTORE_WRITES, 2 if finalized or reopened else 1)
            kept = shard if seen is not None else version.shard
            self._versions.put(job_id, _Version(updated, results[0].update_time, kept))
            return updated

    def find(
        self,
        status: JobStatus,
        updated_before: datetime,
        limit: int,
        updated_after: datetime | None = None,
        after_id: str | None = None,
    ) -> list[Job]:
        # Needs the composite index (status ASC, updated_at ASC), which also serves the
        # order on __name__ (implied ascending last): see docs/cost.md.
        query = self._jobs.where(filter=firestore.FieldFilter("status", "==", status.value))
        query = query.where(filter=firestore.FieldFilter("updated_at", "<", updated_before))
        query = query.order_by("updated_at").order_by("__name__")
        if updated_after is not None and after_id is not None:
            query = query.start_after(
                {"updated_at": updated_after, "__name__": self._jobs.document(after_id)}
            )
        elif updated_after is not None:
            query = query.where(filter=firestore.FieldFilter("updated_at", ">", updated_after))
        return self._query(query.limit(limit))

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
        # The school's whole list adds its users' jobs stored before jobs had an author
        # (client id `<school>:user:<uid>`): a range of client ids, ordered by client_id
        # after created_at (indexes jobs_school_users_*: [status,] [request.submission_id,]
        # created_at DESC, client_id DESC, __name__ DESC).
        # One author's jobs (a student's) add `author` (index jobs_author_created, merged
        # with these), or are the user's jobs stored before jobs had an author: their
        # client_id is the user's scope (see docs/auth.md).
        school = firestore.FieldFilter("client_id", "==", query.client_id)
        q: Any = self._jobs
        if query.author is None:
            legacy = query.client_id + USER_SCOPE_MARK
            users = And(
                [
                    firestore.FieldFilter("client_id", ">=", legacy),
                    firestore.FieldFilter("client_id", "<", _next_prefix(legacy)),
                ]
            )
            q = q.where(filter=Or([school, users]))
        else:
            by_author = And([school, firestore.FieldFilter("author", "==", query.author)])
            scope = Owner(query.client_id, query.author).scope
            q = q.where(filter=Or([by_author, firestore.FieldFilter("client_id", "==", scope)]))
        if query.status is not None:
            q = q.where(filter=firestore.FieldFilter("status", "==", query.status.value))
        if query.submission_id is not None:
            q = q.where(
                filter=firestore.FieldFilter("request.submission_id", "==", query.submission_id)
            )
        q = q.order_by("created_at", direction=firestore.Query.DESCENDING)
        if query.author is None:
            q = q.order_by("client_id", direction=firestore.Query.DESCENDING)
        q = q.order_by("__name__", direction=firestore.Query.DESCENDING)
        if query.after is not None:
            created_at, job_id = query.after
            cursor: dict[str, Any] = {
                "created_at": created_at,
                "__name__": self._jobs.document(job_id),
            }
            if query.author is None:
                cursor["client_id"] = self._stored_client_id(job_id, query.client_id)
            q = q.start_after(cursor)
        try:
            snapshots: list[Any] = list(
                q.limit(query.limit).stream(retry=self._retry, timeout=self._deadline_s)
            )
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore query failed: {exc}") from exc
        self.meter.add(metering.FIRESTORE_QUERIES)
        self.meter.add(metering.FIRESTORE_READS, max(1, len(snapshots)))
        return [from_document(s.id, s.to_dict()) for s in snapshots]

    def _stored_client_id(self, job_id: str, school: str) -> str:
        """The client id stored on a page's last job (the school's list's cursor orders by
        it); a job gone since is placed as the school's own."""
        try:
            snapshot = self._jobs.document(job_id).get(
                field_paths=["client_id"], retry=self._retry, timeout=self._deadline_s
            )
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore read failed: {exc}") from exc
        self.meter.add(metering.FIRESTORE_READS)
        stored = (snapshot.to_dict() or {}).get("client_id") if snapshot.exists else None
        return stored if isinstance(stored, str) else school

    def ping(self) -> None:
        try:
            # One document read (of a name no job can have) proves reachability and rights.
            self._jobs.document("_ping").get(retry=None, timeout=PING_TIMEOUT_S)
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore unreachable: {exc}") from exc


def _next_prefix(prefix: str) -> str:
    """The least string after every string that starts with `prefix`."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)
