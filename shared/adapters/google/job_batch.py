"""Create a batch of jobs on Firestore in batched writes within the commit limit.

The jobs that exist already are found with one `get_all` per chunk; the new ones are
created by atomic batched writes of at most `MAX_WRITES` each (Firestore allows 500),
together with one increment per commit of the client's backlog shard (its total and the
client's count) and of each assignment round's tally, rather than one of each per job.
Under admission limits the shard is read first and written conditioned on that read, as
a single create does: the commit admits only as many jobs as the ceilings leave room for,
and a racing create or batch makes it fail and be decided again. Should a job appear
between the read and the commit (a racing retry), the commit fails as a whole and that
chunk falls back to the job store's one-by-one create.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta
from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import firestore

from shared.adapters.google import backlog_shards, metering
from shared.adapters.google.assignment_store import FirestoreTally
from shared.adapters.google.backlog_shards import BACKLOG_SHARDS, Shard, shard_id, shard_of
from shared.adapters.google.firestore_codec import from_document, to_document
from shared.adapters.google.job_store import SHARD_FIELD, Contended, FirestoreJobStore
from shared.domain.admission import ActiveCounts, AdmissionLimits
from shared.domain.assignment import TallyChange, tally_change
from shared.domain.errors import BacklogFull, DependencyUnavailable, GradeqError, TooManyActiveJobs
from shared.domain.job import Job
from shared.ports import BatchCreated

#: Writes per commit: Firestore's limit is 500; the counters take a few of them.
MAX_WRITES = 500
#: Jobs per commit, leaving room for the clients' backlog shards and tallies.
CHUNK = 480


class FirestoreJobBatch:
    """The JobBatchWriter port on Firestore, counting like `FirestoreJobStore.create`."""

    def __init__(
        self,
        client: firestore.Client,
        store: FirestoreJobStore,
        tally: FirestoreTally | None,
        collection: str,
        counters_collection: str,
        ttl: timedelta,
    ) -> None:
        self._ttl = ttl
        self._client = client
        self._store = store
        self._tally = tally
        self._jobs = client.collection(collection)
        self._counters = client.collection(counters_collection)
        self.meter = metering.Meter()

    def create_many(self, jobs: list[Job], limits: AdmissionLimits | None = None) -> BatchCreated:
        items: list[tuple[Job | None, bool]] = []
        refusal: GradeqError | None = None
        for start in range(0, len(jobs), CHUNK):
            chunk, refused = self._chunk(jobs[start : start + CHUNK], limits, refusal is not None)
            items.extend(chunk)
            refusal = refusal or refused
        return BatchCreated(items, refusal)

    def _chunk(
        self, jobs: list[Job], limits: AdmissionLimits | None, full: bool
    ) -> tuple[list[tuple[Job | None, bool]], GradeqError | None]:
        existing = self._existing(jobs)
        fresh = [job for job in jobs if job.id not in existing]
        refusal: GradeqError | None = None
        try:
            if not fresh or full:
                made = 0  # an earlier chunk was refused: later answers are not admitted
            elif limits is None:
                self._commit(fresh, shard_of(fresh[0].client_id), None)
                made = len(fresh)
            else:
                made, refusal = self._commit_admitted(fresh, limits)
        except gexc.AlreadyExists:
            return self._one_by_one(jobs, limits)  # a racing create won one of them
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore batch create failed: {exc}") from exc
        allowed = {job.id for job in fresh[:made]}
        results: list[tuple[Job | None, bool]] = []
        for job in jobs:
            if job.id in existing:
                results.append((existing[job.id], False))
            else:
                results.append((job, True) if job.id in allowed else (None, False))
        return results, refusal

    def _one_by_one(
        self, jobs: list[Job], limits: AdmissionLimits | None
    ) -> tuple[list[tuple[Job | None, bool]], GradeqError | None]:
        """Settle each job with the job store's own create (checked the same way)."""
        results: list[tuple[Job | None, bool]] = []
        refusal: GradeqError | None = None
        for job in jobs:
            try:
                results.append(self._store.create(job, limits))
            except (TooManyActiveJobs, BacklogFull) as full:
                existing = self._store.get(job.id)
                results.append((existing, False))
                refusal = refusal or (full if existing is None else None)
        return results, refusal

    def _commit_admitted(
        self, fresh: list[Job], limits: AdmissionLimits
    ) -> tuple[int, GradeqError | None]:
        """Create as many of `fresh` as the ceilings admit, conditioned on the counts read.

        The client's backlog shard (and the shards it takes capacity from, when its own
        has too little room) is written conditioned on the version read, as
        `FirestoreJobStore.create` does: a racing create or batch makes the commit fail,
        and it is decided again.
        """
        client_id = fresh[0].client_id
        shard = shard_of(client_id, limits.backlog)
        ref = self._counters.document(shard_id(shard))
        contended = Contended(self._store.deadline_s, f"the job counters of {client_id}")
        while True:
            seen = Shard(shard, self._read([ref])[ref.id])
            mine = seen.of_client(client_id)
            n = min(len(fresh), max(0, limits.per_client - mine))
            by_client = n < len(fresh)
            room = seen.room(limits.backlog)
            donors: list[tuple[Shard, int]] = []  # the shards giving capacity, and how much
            if n > room:
                # Its shard is too full: take capacity from the roomiest others, as many as
                # the batch needs (more reads, only near the ceiling or for a busy client).
                others = [s for s in range(BACKLOG_SHARDS) if s != shard]
                read = self._read([self._counters.document(shard_id(s)) for s in others])
                shards = [Shard(s, read[shard_id(s)]) for s in others]
                need = n - room
                for giver in sorted(shards, key=lambda s: -s.room(limits.backlog)):
                    give = min(need, giver.room(limits.backlog))
                    if give <= 0:
                        break
                    donors.append((giver, give))
                    need -= give
                if need > 0:
                    by_client = False  # the backlog admits fewer than the client's ceiling
                    n -= need
            moved = sum(give for _, give in donors)
            if n <= 0:
                counts = ActiveCounts(mine, 0 if by_client else limits.backlog)
                return 0, limits.refusal(counts)
            try:
                self._commit(fresh[:n], shard, (seen, moved, donors))
            except gexc.FailedPrecondition:
                contended.lost()  # a shard moved since it was read: decide again
                continue
            if n == len(fresh):
                return n, None
            counts = ActiveCounts(mine + n, 0 if by_client else limits.backlog)
            return n, limits.refusal(counts)

    def _read(self, refs: list[Any]) -> dict[str, Any]:
        try:
            snapshots = list(self._client.get_all(refs))
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore read failed: {exc}") from exc
        self.meter.add(metering.FIRESTORE_READS, len(refs))
        return {s.id: s for s in snapshots}

    def _existing(self, jobs: list[Job]) -> dict[str, Job]:
        refs = [self._jobs.document(job.id) for job in jobs]
        try:
            snapshots = list(self._client.get_all(refs))
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore batch read failed: {exc}") from exc
        self.meter.add(metering.FIRESTORE_READS, len(refs))
        return {s.id: from_document(s.id, s.to_dict() or {}) for s in snapshots if s.exists}

    def _commit(
        self,
        jobs: list[Job],
        shard: int,
        checked: tuple[Shard, int, list[tuple[Shard, int]]] | None,
    ) -> None:
        """Create `jobs` (one client's) counted in `shard`: blind, or conditioned on the
        shard as read, with `moved` capacity taken from the donors (`checked`)."""
        batch = self._client.batch()
        tallies: dict[tuple[str, int], dict[str, float]] = defaultdict(lambda: defaultdict(float))
        ttl = self._ttl
        for job in jobs:
            document = to_document(job, ttl, created=True)
            document[SHARD_FIELD] = shard  # the shard it counts down at the end
            batch.create(self._jobs.document(job.id), document)
            change = tally_change(None, job)
            if change is not None:
                for name, delta in change.deltas.items():
                    tallies[(change.assignment_id, change.round)][name] += delta
        ref = self._counters.document(shard_id(shard))
        client_id = jobs[0].client_id
        writes = len(jobs) + 1 + len(tallies)
        if checked is None:
            backlog_shards.count(batch, ref, client_id, len(jobs))
        else:
            seen, moved, donors = checked
            backlog_shards.count_checked(
                batch, self._client, ref, seen, client_id, len(jobs), moved
            )
            for donor, give in donors:
                giver = self._counters.document(shard_id(donor.index))
                backlog_shards.adjust_checked(batch, self._client, giver, donor, -give)
                writes += 1
        if self._tally is not None:
            for (assignment_id, round_), deltas in tallies.items():
                self._tally.add(batch, TallyChange(assignment_id, round_, dict(deltas)))
        assert writes <= MAX_WRITES, writes
        try:
            batch.commit()
        finally:
            self.meter.add(metering.FIRESTORE_WRITES, writes)
