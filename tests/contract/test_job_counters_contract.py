"""What every JobStore must guarantee about its counters of jobs not yet final."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from datetime import timedelta

import pytest

from shared.domain.admission import ActiveCounts, AdmissionLimits
from shared.domain.errors import BacklogFull, GradeqError, TooManyActiveJobs
from shared.domain.grade import GradeResult
from shared.domain.job import Job
from shared.ports import JobStore
from tests.contract.test_job_store_contract import T0, make_job

LEASE = timedelta(seconds=30)
RESULT = GradeResult(8.0, 10.0, "good", (), "g")


def job_of(client_id: str, job_id: str) -> Job:
    return dataclasses.replace(make_job(job_id), client_id=client_id)


def finish(store: JobStore, job_id: str) -> None:
    store.update(job_id, lambda j: j.claim("w", T0, LEASE))
    store.update(job_id, lambda j: j.succeed("w", RESULT, T0))


def test_creates_count_and_replays_do_not(job_store: JobStore) -> None:
    job_store.create(job_of("a", "j1"))
    job_store.create(job_of("a", "j2"))
    job_store.create(job_of("b", "j3"))
    job_store.create(job_of("a", "j1"))  # a replay of the same id
    assert job_store.active_counts("a") == ActiveCounts(2, 3)
    assert job_store.active_counts("b") == ActiveCounts(1, 3)
    assert job_store.active_counts("nobody") == ActiveCounts(0, 3)
    assert job_store.active_jobs_of("a") == 2


def test_reaching_a_final_state_counts_down_once(job_store: JobStore) -> None:
    job_store.create(job_of("a", "j1"))
    job_store.create(job_of("a", "j2"))
    finish(job_store, "j1")
    assert job_store.active_counts("a") == ActiveCounts(1, 1)
    job_store.update("j1", lambda j: j.mark_event_published(T0))  # final to final
    job_store.update("j2", lambda j: j.cancel(T0))
    assert job_store.active_counts("a") == ActiveCounts(0, 0)


def test_the_client_ceiling_refuses_new_jobs_and_writes_nothing(job_store: JobStore) -> None:
    limits = AdmissionLimits(per_client=2, backlog=100, retry_after_s=7)
    job_store.create(job_of("a", "j1"), limits)
    job_store.create(job_of("a", "j2"), limits)
    with pytest.raises(TooManyActiveJobs) as refused:
        job_store.create(job_of("a", "j3"), limits)
    assert refused.value.retry_after_s == 7
    assert job_store.get("j3") is None
    assert job_store.active_counts("a") == ActiveCounts(2, 2)
    # A retry of an admitted job is answered, and another client is not affected.
    assert job_store.create(job_of("a", "j2"), limits)[1] is False
    assert job_store.create(job_of("b", "j4"), limits)[1] is True
    finish(job_store, "j1")
    assert job_store.create(job_of("a", "j3"), limits)[1] is True


def test_user_scopes_count_against_their_clients_ceiling(job_store: JobStore) -> None:
    limits = AdmissionLimits(per_client=2, backlog=100)
    job_store.create(job_of("a", "j1"), limits)
    job_store.create(job_of("a:user:u1", "j2"), limits)
    with pytest.raises(TooManyActiveJobs):
        job_store.create(job_of("a:user:u2", "j3"), limits)
    assert job_store.get("j3") is None
    assert job_store.active_counts("a") == ActiveCounts(2, 2)
    assert job_store.active_counts("a:user:u2") == ActiveCounts(2, 2)
    assert job_store.active_jobs_of("a:user:u1") == 2
    # The user's job reaching a final state makes room in the client's count.
    finish(job_store, "j2")
    assert job_store.create(job_of("a:user:u2", "j3"), limits)[1] is True


def test_the_backlog_ceiling_refuses_everyone(job_store: JobStore) -> None:
    limits = AdmissionLimits(per_client=10, backlog=2)
    job_store.create(job_of("a", "j1"), limits)
    job_store.create(job_of("b", "j2"), limits)
    with pytest.raises(BacklogFull):
        job_store.create(job_of("c", "j3"), limits)
    assert job_store.get("j3") is None
    finish(job_store, "j1")
    assert job_store.create(job_of("c", "j3"), limits)[1] is True


def test_racing_creates_and_cancels_count_each_job_once(job_store: JobStore) -> None:
    job_store.create(job_of("a", "keep"))

    def race(action: object) -> None:
        threads = [threading.Thread(target=action) for _ in range(6)]  # type: ignore[arg-type]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    race(lambda: job_store.create(job_of("a", "j1")))
    assert job_store.active_counts("a") == ActiveCounts(2, 2)

    def cancel() -> None:
        # The losers find the job already final and change nothing.
        with contextlib.suppress(GradeqError):
            job_store.update("j1", lambda j: j.cancel(T0))

    race(cancel)
    assert job_store.active_counts("a") == ActiveCounts(1, 1)
