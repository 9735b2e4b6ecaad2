"""What every JobStore must guarantee when listing a client's jobs page by page."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from shared.domain.job import Job
from shared.domain.status import JobStatus
from shared.ports import JobQuery, JobStore
from tests.contract.test_job_store_contract import T0, make_job


def job(client_id: str, job_id: str, minute: int, submission: str = "sub-1") -> Job:
    base = make_job(job_id, now=T0 + timedelta(minutes=minute))
    request = dataclasses.replace(base.request, submission_id=submission)
    return dataclasses.replace(base, client_id=client_id, request=request)


def ids(jobs: list[Job]) -> list[str]:
    return [j.id for j in jobs]


def test_a_client_sees_its_own_jobs_newest_first(job_store: JobStore) -> None:
    for j in (job("a", "a1", 1), job("a", "a2", 2), job("b", "b1", 3), job("a", "a3", 3)):
        job_store.create(j)
    assert ids(job_store.list_jobs(JobQuery("a", limit=10))) == ["a3", "a2", "a1"]
    assert ids(job_store.list_jobs(JobQuery("b", limit=10))) == ["b1"]
    assert job_store.list_jobs(JobQuery("nobody", limit=10)) == []


def test_pages_continue_after_the_last_job_even_at_equal_times(job_store: JobStore) -> None:
    for i in range(5):
        job_store.create(job("a", f"j{i}", minute=1 if i < 3 else 2))
    first = job_store.list_jobs(JobQuery("a", limit=2))
    assert ids(first) == ["j4", "j3"]
    last = first[-1]
    second = job_store.list_jobs(JobQuery("a", limit=2, after=(last.created_at, last.id)))
    assert ids(second) == ["j2", "j1"]
    last = second[-1]
    third = job_store.list_jobs(JobQuery("a", limit=2, after=(last.created_at, last.id)))
    assert ids(third) == ["j0"]


def test_filters_by_status_and_submission(job_store: JobStore) -> None:
    job_store.create(job("a", "x1", 1, "essay-1"))
    job_store.create(job("a", "x2", 2, "essay-2"))
    job_store.create(job("a", "x3", 3, "essay-1"))
    job_store.update("x3", lambda j: j.cancel(T0))
    by_submission = JobQuery("a", limit=10, submission_id="essay-1")
    assert ids(job_store.list_jobs(by_submission)) == ["x3", "x1"]
    pending = JobQuery("a", limit=10, status=JobStatus.PENDING)
    assert ids(job_store.list_jobs(pending)) == ["x2", "x1"]
    both = JobQuery("a", limit=10, status=JobStatus.CANCELLED, submission_id="essay-1")
    assert ids(job_store.list_jobs(both)) == ["x3"]
