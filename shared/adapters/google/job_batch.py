"""Create a batch of jobs on Firestore in batched writes within the commit limit.

The jobs that exist already are found with one `get_all` per chunk; the new ones are
created by atomic batched writes of at most `MAX_WRITES` each (Firestore allows 500),
together with one increment per commit of each client's backlog shard (its total and the
client's count) and of each assignment round's tally, rather than one of each per job.
Should a job appear between the read and the commit (a racing retry), the commit fails
as a whole and that chunk falls back to the job store's one-by-one create.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta

from google.api_core import exceptions as gexc
from google.cloud import firestore

from shared.adapters.google import backlog_shards, metering
from shared.adapters.google.assignment_store import FirestoreTally
from shared.adapters.google.backlog_shards import shard_id, shard_of
from shared.adapters.google.firestore_codec import from_document, to_document
from shared.adapters.google.job_store import SHARD_FIELD, FirestoreJobStore
from shared.domain.admission import counted_as
from shared.domain.assignment import TallyChange, tally_change
from shared.domain.errors import DependencyUnavailable
from shared.domain.job import Job

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

    def create_many(
        self, jobs: list[Job], capacity: int | None = None
    ) -> list[tuple[Job | None, bool]]:
        results: list[tuple[Job | None, bool]] = []
        room = capacity
        for start in range(0, len(jobs), CHUNK):
            chunk, made = self._chunk(jobs[start : start + CHUNK], room)
            results.extend(chunk)
            room = None if room is None else room - made
        return results

    def _chunk(
        self, jobs: list[Job], room: int | None
    ) -> tuple[list[tuple[Job | None, bool]], int]:
        existing = self._existing(jobs)
        fresh = [job for job in jobs if job.id not in existing]
        allowed = {job.id for job in (fresh if room is None else fresh[: max(0, room)])}
        if allowed:
            try:
                self._commit([job for job in fresh if job.id in allowed])
            except gexc.AlreadyExists:
                # A racing create won one of them: settle each on its own.
                settled: list[tuple[Job | None, bool]] = [
                    self._store.create(job)
                    if job.id in allowed or job.id in existing
                    else (None, False)
                    for job in jobs
                ]
                return settled, sum(1 for _, created in settled if created)
            except gexc.GoogleAPIError as exc:
                raise DependencyUnavailable(f"Firestore batch create failed: {exc}") from exc
        results: list[tuple[Job | None, bool]] = []
        for job in jobs:
            if job.id in existing:
                results.append((existing[job.id], False))
            else:
                results.append((job, True) if job.id in allowed else (None, False))
        return results, len(allowed)

    def _existing(self, jobs: list[Job]) -> dict[str, Job]:
        refs = [self._jobs.document(job.id) for job in jobs]
        try:
            snapshots = list(self._client.get_all(refs))
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore batch read failed: {exc}") from exc
        self.meter.add(metering.FIRESTORE_READS, len(refs))
        return {s.id: from_document(s.id, s.to_dict() or {}) for s in snapshots if s.exists}

    def _commit(self, jobs: list[Job]) -> None:
        batch = self._client.batch()
        per_client: dict[str, int] = defaultdict(int)
        tallies: dict[tuple[str, int], dict[str, float]] = defaultdict(lambda: defaultdict(float))
        ttl = self._ttl
        for job in jobs:
            document = to_document(job, ttl, created=True)
            document[SHARD_FIELD] = shard_of(job.client_id)  # the shard it counts down at the end
            batch.create(self._jobs.document(job.id), document)
            per_client[counted_as(job.client_id)] += 1
            change = tally_change(None, job)
            if change is not None:
                for name, delta in change.deltas.items():
                    tallies[(change.assignment_id, change.round)][name] += delta
        for client_id, n in per_client.items():
            shard = self._counters.document(shard_id(shard_of(client_id)))
            backlog_shards.count(batch, shard, client_id, n)
        if self._tally is not None:
            for (assignment_id, round_), deltas in tallies.items():
                self._tally.add(batch, TallyChange(assignment_id, round_, dict(deltas)))
        writes = len(jobs) + len(per_client) + len(tallies)
        assert writes <= MAX_WRITES, writes
        batch.commit()
        self.meter.add(metering.FIRESTORE_WRITES, writes)
