"""The operator's queries every JobStore answers alike: listings, counts, the recent window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest, Job, JobError
from shared.domain.status import JobStatus
from shared.ports import JobCursor, JobFilter, JobStore

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=30)


def seed(
    store: JobStore,
    job_id: str,
    minute: int,
    client: str = "client-a",
    assignment: str | None = "hw-1",
) -> Job:
    request = GradingRequest(
        submission_id="s-" + job_id, answer="a", rubric="r", assignment_id=assignment
    )
    job = Job.new(job_id, client, request, "fp", T0 + timedelta(minutes=minute))
    store.create(job)
    return job


def finish(store: JobStore, job_id: str, at: datetime, *, ok: bool = True) -> Job:
    store.update(job_id, lambda j: j.claim("w", at - timedelta(seconds=5), LEASE))
    if ok:
        return store.update(job_id, lambda j: j.succeed("w", GradeResult(1, 10, "ok"), at))
    return store.update(job_id, lambda j: j.fail("w", JobError("grading-permanent", "x"), at))


def ids(jobs: list[Job]) -> list[str]:
    return [j.id for j in jobs]


def test_list_is_newest_first_and_pages_by_cursor(job_store: JobStore) -> None:
    for n in range(5):
        seed(job_store, f"job{n}", minute=n)
    seed(job_store, "job5", minute=4)  # same creation time as job4: the id breaks the tie
    first = job_store.find_jobs(JobFilter(), limit=3)
    assert ids(first) == ["job5", "job4", "job3"]
    cursor = JobCursor(first[-1].created_at, first[-1].id)
    second = job_store.find_jobs(JobFilter(), limit=3, after=cursor)
    assert ids(second) == ["job2", "job1", "job0"]
    last = JobCursor(second[-1].created_at, second[-1].id)
    assert job_store.find_jobs(JobFilter(), limit=3, after=last) == []
    tie = JobCursor(T0 + timedelta(minutes=4), "job5")
    assert ids(job_store.find_jobs(JobFilter(), limit=1, after=tie)) == ["job4"]


def test_list_filters_by_status_client_assignment_and_created_range(job_store: JobStore) -> None:
    seed(job_store, "a1", minute=0)
    seed(job_store, "b1", minute=1, client="client-b")
    seed(job_store, "a2", minute=2, assignment="hw-2")
    seed(job_store, "a3", minute=3)
    finish(job_store, "a3", T0 + timedelta(minutes=10), ok=False)

    def listed(**where: object) -> list[str]:
        return ids(job_store.find_jobs(JobFilter(**where), limit=10))  # type: ignore[arg-type]

    assert listed(status=JobStatus.FAILED) == ["a3"]
    assert listed(status=JobStatus.PENDING) == ["a2", "b1", "a1"]
    assert listed(client_id="client-b") == ["b1"]
    assert listed(assignment_id="hw-2") == ["a2"]
    assert listed(client_id="client-a", assignment_id="hw-1") == ["a3", "a1"]
    assert listed(status=JobStatus.PENDING, client_id="client-a") == ["a2", "a1"]
    window = {"created_from": T0 + timedelta(minutes=1), "created_to": T0 + timedelta(minutes=3)}
    assert listed(**window) == ["a2", "b1"]
    assert listed(status=JobStatus.PENDING, client_id="client-a", **window) == ["a2"]


def test_list_reads_the_latest_state(job_store: JobStore) -> None:
    seed(job_store, "j", minute=0)
    done = finish(job_store, "j", T0 + timedelta(minutes=1))
    assert job_store.find_jobs(JobFilter(status=JobStatus.SUCCEEDED), limit=5) == [done]


def test_counts_by_status_stop_at_the_cap(job_store: JobStore) -> None:
    for n in range(4):
        seed(job_store, f"p{n}", minute=n)
    finish(job_store, "p0", T0 + timedelta(minutes=5), ok=False)
    counts = job_store.count_by_status(cap=10)
    assert counts == {
        JobStatus.PENDING: 3,
        JobStatus.RUNNING: 0,
        JobStatus.RETRYING: 0,
        JobStatus.SUCCEEDED: 0,
        JobStatus.FAILED: 1,
        JobStatus.CANCELLED: 0,
    }
    assert job_store.count_by_status(cap=2)[JobStatus.PENDING] == 2


def test_completed_between_is_the_window_newest_first(job_store: JobStore) -> None:
    for n in range(4):
        seed(job_store, f"c{n}", minute=n)
        finish(job_store, f"c{n}", T0 + timedelta(minutes=10 + n), ok=n != 2)
    seed(job_store, "waiting", minute=5)
    since, until = T0 + timedelta(minutes=11), T0 + timedelta(minutes=13)
    window = job_store.completed_between(since, until, limit=10)
    assert ids(window) == ["c2", "c1"]  # [since, until): c3 at minute 13 is out
    assert window[0].status is JobStatus.FAILED
    assert ids(job_store.completed_between(T0, until, limit=1)) == ["c2"]
