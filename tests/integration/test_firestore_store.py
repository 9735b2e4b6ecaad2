"""FirestoreJobStore and FirestoreProcessedEvents on the official Firestore emulator.

The behaviour every JobStore shares is in tests/contract; these tests pin what is
Firestore's own: the document layout (TTL field, server timestamps), the operations
each call costs, and create-once semantics of the dedup records.
"""

from __future__ import annotations

import dataclasses
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from shared.adapters.google import metering
from shared.adapters.google.backlog_shards import shard_of
from shared.adapters.google.job_store import BACKLOG_SHARDS, FirestoreJobStore, shard_capacity
from shared.adapters.google.processed_events import FirestoreProcessedEvents
from shared.domain.admission import ActiveCounts, AdmissionLimits
from shared.domain.errors import BacklogFull, JobLocked, JobNotFound, TooManyActiveJobs
from shared.domain.job import GradingRequest, Job
from shared.domain.status import JobStatus
from tests.google_fixtures import JOB_TTL

pytestmark = pytest.mark.emulator

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=30)


def make_job(job_id: str = "j-1", now: datetime = T0, answer: str = "an answer") -> Job:
    request = GradingRequest(submission_id="s-1", answer=answer, rubric="be right")
    return Job.new(job_id, "client-a", request, "fp-" + answer, now)


def raw(client: Any, job_id: str) -> dict[str, Any]:
    snapshot = client.collection("grading_jobs").document(job_id).get()
    assert snapshot.exists
    data: dict[str, Any] = snapshot.to_dict()
    return data


def test_document_is_named_by_job_id_and_carries_ttl_and_server_times(
    firestore_job_store: FirestoreJobStore, firestore_clean: Any
) -> None:
    before = datetime.now(UTC) - timedelta(seconds=5)
    firestore_job_store.create(make_job())
    doc = raw(firestore_clean, "j-1")
    assert doc["status"] == "PENDING"
    assert doc["client_id"] == "client-a" and doc["fingerprint"] == "fp-an answer"
    assert doc["expire_at"] == T0 + JOB_TTL
    assert doc["server_created_at"] >= before and doc["server_updated_at"] >= before
    assert "id" not in doc  # the id is the document's name


def test_update_keeps_server_created_at_and_the_ttl(
    firestore_job_store: FirestoreJobStore, firestore_clean: Any
) -> None:
    firestore_job_store.create(make_job())
    created = raw(firestore_clean, "j-1")
    firestore_job_store.update("j-1", lambda j: j.claim("w1", T0 + LEASE, LEASE))
    updated = raw(firestore_clean, "j-1")
    assert updated["server_created_at"] == created["server_created_at"]
    assert updated["server_updated_at"] >= created["server_updated_at"]
    assert updated["expire_at"] == T0 + JOB_TTL  # rewrites never postpone expiry
    assert updated["status"] == "RUNNING" and updated["lease_owner"] == "w1"


def test_each_call_costs_the_minimum_operations(firestore_job_store: FirestoreJobStore) -> None:
    meter = firestore_job_store.meter
    firestore_job_store.create(make_job())
    # The job and its client's backlog shard (the total and the client's count), in one batch.
    assert meter.snapshot() == {metering.FIRESTORE_WRITES: 2}
    meter.reset()
    firestore_job_store.update("j-1", lambda j: j.claim("w1", T0, LEASE))
    # This instance wrote the job last: it knows the version and writes without a read.
    assert meter.snapshot() == {metering.FIRESTORE_WRITES: 1}
    meter.reset()
    _, created = firestore_job_store.create(make_job())
    assert not created
    # The failed batch is counted as its write attempts; reading the winner is one read.
    assert meter.snapshot() == {metering.FIRESTORE_WRITES: 2, metering.FIRESTORE_READS: 1}
    meter.reset()
    firestore_job_store.update("j-1", lambda j: j.cancel(T0))
    # The first final state: the job and -1 on its shard, blind.
    assert meter.snapshot() == {metering.FIRESTORE_WRITES: 2}


def test_another_instance_reads_once_then_writes_once(
    firestore_job_store: FirestoreJobStore, firestore_clean: Any
) -> None:
    firestore_job_store.create(make_job())
    firestore_job_store.update("j-1", lambda j: j.claim("w1", T0, LEASE))
    other = FirestoreJobStore(firestore_clean, "grading_jobs", JOB_TTL)
    other.update("j-1", lambda j: j.renew("w1", T0, LEASE * 2))
    assert other.meter.snapshot() == {metering.FIRESTORE_READS: 1, metering.FIRESTORE_WRITES: 1}
    # The first instance's version is now stale: its write is refused, it reads and
    # decides again on the job as the other left it.
    firestore_job_store.meter.reset()
    renewed = firestore_job_store.update("j-1", lambda j: j.renew("w1", T0, LEASE * 3))
    assert renewed.lease_expires_at == T0 + LEASE * 3
    assert firestore_job_store.meter.snapshot() == {
        metering.FIRESTORE_READS: 1,
        metering.FIRESTORE_WRITES: 2,  # the refused attempt, counted to be safe, and the write
    }
    # A decision refused on a stale version is made again on a read, not raised.
    with pytest.raises(JobLocked):
        other.update("j-1", lambda j: j.claim("w2", T0 + LEASE * 2, LEASE))
    stored = firestore_job_store.get("j-1")
    assert stored is not None and stored.lease_expires_at == T0 + LEASE * 3


def test_the_emulator_refuses_a_write_conditioned_on_an_old_version(firestore_clean: Any) -> None:
    """What the store's compare-and-set relies on: update_time preconditions are honoured."""
    from google.api_core import exceptions as gexc

    ref = firestore_clean.collection("grading_jobs").document("cas")
    ref.set({"n": 1})
    seen = ref.get().update_time
    option = firestore_clean.write_option(last_update_time=seen)
    written = ref.update({"n": 2}, option=option)
    with pytest.raises(gexc.FailedPrecondition):
        ref.update({"n": 3}, option=option)
    assert ref.get().to_dict() == {"n": 2}
    ref.update({"n": 4}, option=firestore_clean.write_option(last_update_time=written.update_time))
    assert ref.get().to_dict() == {"n": 4}


def test_a_refused_transition_is_one_read_and_no_write(
    firestore_job_store: FirestoreJobStore, firestore_clean: Any
) -> None:
    firestore_job_store.create(make_job())
    firestore_job_store.update("j-1", lambda j: j.claim("w1", T0, LEASE))
    before = raw(firestore_clean, "j-1")
    firestore_job_store.meter.reset()
    with pytest.raises(JobLocked):
        firestore_job_store.update("j-1", lambda j: j.claim("w2", T0, LEASE))
    assert firestore_job_store.meter.snapshot().get(metering.FIRESTORE_WRITES, 0) == 0
    assert raw(firestore_clean, "j-1") == before


def test_unknown_job_update_is_not_found_and_creates_nothing(
    firestore_job_store: FirestoreJobStore,
) -> None:
    with pytest.raises(JobNotFound):
        firestore_job_store.update("ghost", lambda j: j)
    assert firestore_job_store.get("ghost") is None


def _counting_get_all(client: Any, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of documents of each get_all call made from now on."""
    batches: list[int] = []
    get_all = client.get_all

    def counting_get_all(refs: Any, **kwargs: Any) -> Any:
        refs = list(refs)
        batches.append(len(refs))
        return get_all(refs, **kwargs)

    monkeypatch.setattr(client, "get_all", counting_get_all)
    return batches


def _shard_documents(client: Any) -> list[dict[str, Any]]:
    counters = client.collection("grading_jobs_counters")
    return [counters.document(f"backlog:{s}").get().to_dict() or {} for s in range(BACKLOG_SHARDS)]


def test_admission_reads_the_clients_shard_only_and_writes_it_with_the_job(
    firestore_job_store: FirestoreJobStore, firestore_clean: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    limits = AdmissionLimits(per_client=10, backlog=100)
    other = dataclasses.replace(make_job("j-0"), client_id="client-b")
    firestore_job_store.create(other, limits)
    batches = _counting_get_all(firestore_clean, monkeypatch)
    meter = firestore_job_store.meter
    meter.reset()
    admission = firestore_job_store.admit(make_job("j-1"), limits)
    assert admission.created and admission.ahead == 0
    # One document answers both ceilings: the shard holding the client's count.
    assert batches == [1]
    assert meter.snapshot() == {metering.FIRESTORE_READS: 1, metering.FIRESTORE_WRITES: 2}
    assert firestore_job_store.admit(make_job("j-2"), limits).ahead == 1
    assert firestore_job_store.active_counts("client-a") == ActiveCounts(2, 3)
    shard = _shard_documents(firestore_clean)[shard_of("client-a", limits.backlog)]
    assert shard["clients"]["c:client-a"] == 2
    assert raw(firestore_clean, "j-1")["backlog_shard"] == shard_of("client-a", limits.backlog)


def test_a_full_backlog_refuses_after_reading_every_shard(
    firestore_job_store: FirestoreJobStore,
) -> None:
    limits = AdmissionLimits(per_client=10, backlog=3)
    firestore_job_store.create(dataclasses.replace(make_job("j-0"), client_id="client-b"), limits)
    firestore_job_store.create(make_job("j-1"), limits)
    firestore_job_store.create(make_job("j-2"), limits)
    assert firestore_job_store.active_counts("client-a") == ActiveCounts(2, 3)
    with pytest.raises(BacklogFull):
        firestore_job_store.create(make_job("j-3"), limits)
    assert firestore_job_store.get("j-3") is None


def test_a_full_shard_takes_capacity_from_a_roomy_one_in_the_jobs_batch(
    firestore_job_store: FirestoreJobStore, firestore_clean: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    limits = AdmissionLimits(per_client=100, backlog=16)  # 2 per shard
    own = shard_of("client-a", limits.backlog)
    firestore_job_store.create(make_job("j-0"), limits)
    firestore_job_store.create(make_job("j-1"), limits)
    batches = _counting_get_all(firestore_clean, monkeypatch)
    meter = firestore_job_store.meter
    meter.reset()
    firestore_job_store.create(make_job("j-2"), limits)
    # The full shard, then the seven others; the job, its shard and the donor.
    assert batches == [1, BACKLOG_SHARDS - 1]
    assert meter.snapshot() == {metering.FIRESTORE_READS: 8, metering.FIRESTORE_WRITES: 3}
    shards = _shard_documents(firestore_clean)
    adjustments = [s.get("capacity_adjustment", 0) for s in shards]
    assert sum(adjustments) == 0
    # Half the donor's room (2 -> 1) moved: the shard now holds 3 of its 3.
    assert adjustments[own] == 1 and sorted(adjustments).count(-1) == 1
    assert shards[own]["active"] == 3 and shards[own]["clients"] == {"c:client-a": 3}
    # The next job moves capacity again; the ceiling still holds for every client.
    firestore_job_store.create(make_job("j-3"), limits)
    assert sum(s.get("capacity_adjustment", 0) for s in _shard_documents(firestore_clean)) == 0


@pytest.mark.parametrize("client_id", ["a.b", "a:b", "x`y\\z", "1 2", "héllo", "__x__"])
def test_any_client_id_is_one_key_of_its_shards_map(
    firestore_job_store: FirestoreJobStore, firestore_clean: Any, client_id: str
) -> None:
    limits = AdmissionLimits(per_client=2, backlog=100)
    for i in range(2):
        job = dataclasses.replace(make_job(f"j-{i}"), client_id=client_id)
        assert firestore_job_store.create(job, limits)[1] is True
    with pytest.raises(TooManyActiveJobs):
        firestore_job_store.create(
            dataclasses.replace(make_job("j-9"), client_id=client_id), limits
        )
    assert firestore_job_store.active_counts(client_id) == ActiveCounts(2, 2)
    firestore_job_store.update("j-0", lambda j: j.cancel(T0))
    shard = _shard_documents(firestore_clean)[shard_of(client_id, limits.backlog)]
    assert shard["clients"] == {"c:" + client_id: 1} and shard["active"] == 1


def test_shard_shares_add_up_to_the_ceiling() -> None:
    for backlog in (1, 2, 7, 8, 9, 100, 100_003):
        shares = [shard_capacity(s, backlog) for s in range(BACKLOG_SHARDS)]
        assert sum(shares) == backlog and max(shares) - min(shares) <= 1


def test_a_job_counts_down_the_shard_it_was_counted_in(
    firestore_job_store: FirestoreJobStore, firestore_clean: Any
) -> None:
    limits = AdmissionLimits(per_client=10, backlog=100)
    for i in range(6):
        firestore_job_store.create(make_job(f"j-{i}"), limits)
        firestore_job_store.update(f"j-{i}", lambda j: j.cancel(T0))
    shards = _shard_documents(firestore_clean)
    assert [s.get("active", 0) for s in shards] == [0] * BACKLOG_SHARDS
    assert [sum(s.get("clients", {}).values()) for s in shards] == [0] * BACKLOG_SHARDS


def test_find_counts_one_read_even_when_empty(firestore_job_store: FirestoreJobStore) -> None:
    assert firestore_job_store.find(JobStatus.RUNNING, T0, 10) == []
    assert firestore_job_store.meter.snapshot()[metering.FIRESTORE_READS] == 1


def test_find_skips_jobs_updated_after_the_cutoff(firestore_job_store: FirestoreJobStore) -> None:
    firestore_job_store.create(make_job("old", now=T0 - timedelta(hours=2)))
    firestore_job_store.create(make_job("new", now=T0))
    found = firestore_job_store.find(JobStatus.PENDING, T0 - timedelta(hours=1), 10)
    assert [j.id for j in found] == ["old"]
    assert found[0] == make_job("old", now=T0 - timedelta(hours=2))


def test_lease_expiry_lets_another_owner_finish(firestore_job_store: FirestoreJobStore) -> None:
    tiny = timedelta(milliseconds=5)
    firestore_job_store.create(make_job())
    firestore_job_store.update("j-1", lambda j: j.claim("w1", T0, tiny))
    taken = firestore_job_store.update("j-1", lambda j: j.claim("w2", T0 + tiny * 2, LEASE))
    assert taken.lease_owner == "w2" and taken.attempts == 2
    assert taken.lease_expires_at == T0 + tiny * 2 + LEASE  # microseconds survive the trip


def test_processed_events_first_add_wins_under_concurrency(
    google_processed_events: FirestoreProcessedEvents,
) -> None:
    outcomes: list[bool] = []
    lock = threading.Lock()

    def add(i: int) -> None:
        added = google_processed_events.add("notification", "e-1", {"attempt": i})
        with lock:
            outcomes.append(added)

    threads = [threading.Thread(target=add, args=(i,)) for i in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == [False] * 4 + [True]
    assert google_processed_events.contains("notification", "e-1")
    assert not google_processed_events.contains("analytics", "e-1")
    assert google_processed_events.add("analytics", "e-1", {}) is True
