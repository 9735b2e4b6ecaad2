"""What every JobStore must guarantee: one job per id, atomic read-modify-write, queries."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from shared.domain.errors import JobLocked, JobNotFound
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest, Job
from shared.domain.status import JobStatus
from shared.ports import JobStore

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=30)


def make_job(job_id: str = "job1", now: datetime = T0, answer: str = "an answer") -> Job:
    request = GradingRequest(
        submission_id="sub-1",
        answer=answer,
        rubric=("mentions photosynthesis", "explains chlorophyll"),
        max_score=10,
        metadata={"course": "bio-101"},
    )
    return Job.new(job_id, "client-a", request, "fp-" + answer, now)


def test_create_then_get_round_trips_every_field(job_store: JobStore) -> None:
    job = make_job()
    stored, created = job_store.create(job)
    assert created
    fetched = job_store.get(job.id)
    assert fetched == job == stored


def test_second_create_returns_the_existing_job(job_store: JobStore) -> None:
    first = make_job(answer="first")
    job_store.create(first)
    existing, created = job_store.create(make_job(answer="second"))
    assert not created
    assert existing.fingerprint == "fp-first"


def test_get_unknown_is_none(job_store: JobStore) -> None:
    assert job_store.get("nope") is None


def test_update_applies_the_transition_atomically(job_store: JobStore) -> None:
    job_store.create(make_job())
    claimed = job_store.update("job1", lambda j: j.claim("w1", T0, LEASE))
    assert claimed.status is JobStatus.RUNNING
    assert claimed.lease_owner == "w1"
    result = GradeResult(8.0, 10.0, "good", ({"criterion": "x", "met": True},), "g")
    done = job_store.update("job1", lambda j: j.succeed("w1", result, T0 + LEASE / 2))
    fetched = job_store.get("job1")
    assert fetched == done
    assert fetched is not None and fetched.result == result


def test_update_that_raises_writes_nothing(job_store: JobStore) -> None:
    job_store.create(make_job())
    job_store.update("job1", lambda j: j.claim("w1", T0, LEASE))
    with pytest.raises(JobLocked):
        job_store.update("job1", lambda j: j.claim("w2", T0 + timedelta(seconds=1), LEASE))
    fetched = job_store.get("job1")
    assert fetched is not None and fetched.lease_owner == "w1" and fetched.attempts == 1


def test_update_unknown_job_raises_not_found(job_store: JobStore) -> None:
    with pytest.raises(JobNotFound):
        job_store.update("missing", lambda j: j)


def test_expired_lease_can_be_taken_over(job_store: JobStore) -> None:
    job_store.create(make_job())
    job_store.update("job1", lambda j: j.claim("w1", T0, LEASE))
    later = T0 + LEASE + timedelta(seconds=1)
    taken = job_store.update("job1", lambda j: j.claim("w2", later, LEASE))
    assert taken.lease_owner == "w2"
    assert taken.attempts == 2


def test_concurrent_creates_of_one_id_make_one_job(job_store: JobStore) -> None:
    outcomes: list[bool] = []
    lock = threading.Lock()

    def create(i: int) -> None:
        _, created = job_store.create(make_job(answer=f"answer {i}"))
        with lock:
            outcomes.append(created)

    threads = [threading.Thread(target=create, args=(i,)) for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == [False] * 9 + [True]


def test_concurrent_claims_have_one_winner(job_store: JobStore) -> None:
    job_store.create(make_job())
    winners: list[str] = []
    losers: list[str] = []
    lock = threading.Lock()

    def claim(owner: str) -> None:
        try:
            job_store.update("job1", lambda j: j.claim(owner, T0, LEASE))
            with lock:
                winners.append(owner)
        except JobLocked:
            with lock:
                losers.append(owner)

    threads = [threading.Thread(target=claim, args=(f"w{i}",)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(winners) == 1 and len(losers) == 1
    fetched = job_store.get("job1")
    assert fetched is not None and fetched.lease_owner == winners[0] and fetched.attempts == 1


def test_find_by_status_and_age_oldest_first(job_store: JobStore) -> None:
    for i, minutes in enumerate([30, 10, 20, 1]):
        job_store.create(make_job(f"job{i}", now=T0 - timedelta(minutes=minutes)))
    job_store.update("job2", lambda j: j.claim("w", T0, LEASE))
    stale = job_store.find(JobStatus.PENDING, T0 - timedelta(minutes=5), limit=10)
    assert [j.id for j in stale] == ["job0", "job1"]
    assert [j.id for j in job_store.find(JobStatus.PENDING, T0, limit=1)] == ["job0"]
    assert [j.id for j in job_store.find(JobStatus.RUNNING, T0 + LEASE, 10)] == ["job2"]


def test_ping_succeeds_when_reachable(job_store: JobStore) -> None:
    job_store.ping()


def test_find_pages_on_updated_at_then_id_so_ties_across_a_page_are_each_found(
    job_store: JobStore,
) -> None:
    job_store.create(make_job("a-older", now=T0 - timedelta(seconds=1)))
    for key in ("t3", "t0", "t4", "t1", "t2"):  # one updated_at, stored out of id order
        job_store.create(make_job(f"tie-{key}", now=T0))
    job_store.create(make_job("a-newer", now=T0 + timedelta(seconds=1)))
    before = T0 + timedelta(minutes=1)

    pages: list[list[str]] = []
    after: datetime | None = None
    after_id: str | None = None
    while page := job_store.find(
        JobStatus.PENDING, before, 2, updated_after=after, after_id=after_id
    ):
        pages.append([j.id for j in page])
        after, after_id = page[-1].updated_at, page[-1].id
    assert pages == [
        ["a-older", "tie-t0"],
        ["tie-t1", "tie-t2"],
        ["tie-t3", "tie-t4"],
        ["a-newer"],
    ]

    # `updated_after` alone stays exclusive of its moment: every tie is skipped.
    alone = job_store.find(JobStatus.PENDING, before, 10, updated_after=T0)
    assert [j.id for j in alone] == ["a-newer"]
    # The keyset excludes the cursor's job itself and orders the rest by id.
    rest = job_store.find(JobStatus.PENDING, before, 10, updated_after=T0, after_id="tie-t2")
    assert [j.id for j in rest] == ["tie-t3", "tie-t4", "a-newer"]
