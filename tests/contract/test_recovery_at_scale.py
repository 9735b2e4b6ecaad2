"""The sweep's queries on a store holding thousands of jobs, on both store adapters.

Final jobs left unannounced are found by the store's query however many announced jobs
are older; stale non-final jobs are paged through; and a job whose task is still queued
(a deep backlog) is left to its task.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.grade import GradeResult
from shared.domain.ids import task_name_for
from shared.domain.job import GradingRequest, Job
from shared.domain.status import JobStatus
from shared.ports import JobStore, TaskSpec
from shared.service_layer.recovery import RecoveryService
from tests.fakes import FakePublisher, FakeTaskQueue

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
ANNOUNCED = 1200
BACKLOG = 800
REQUEST = GradingRequest(submission_id="s", answer="a", rubric="r")


def job(job_id: str, at: datetime, status: JobStatus = JobStatus.PENDING, **changes: object) -> Job:
    fresh = Job.new(job_id, "client-a", REQUEST, "fp", at)
    return dataclasses.replace(fresh, status=status, **changes)  # type: ignore[arg-type]


def finished(job_id: str, at: datetime, published: bool) -> Job:
    result = GradeResult(5, 10, "ok")
    return job(
        job_id, at, JobStatus.SUCCEEDED, completed_at=at, result=result, event_published=published
    )


@pytest.fixture
def crowded(job_store: JobStore) -> JobStore:
    """Thousands of jobs: announced final ones, then a deep PENDING backlog, oldest first."""
    for i in range(ANNOUNCED):
        job_store.create(finished(f"done-{i:05d}", T0 + timedelta(seconds=i), published=True))
    for i in range(BACKLOG):
        job_store.create(job(f"queued-{i:05d}", T0 + timedelta(seconds=ANNOUNCED + i)))
    return job_store


def test_the_sweep_finds_its_jobs_among_thousands(crowded: JobStore) -> None:
    # An unannounced final job newer than 1200 announced ones: found by the query itself.
    late = T0 + timedelta(hours=2)
    crowded.create(finished("silent", late, published=False))
    crowded.create(finished("too-young", late + timedelta(hours=1), published=False))
    found = crowded.find_unannounced(late + timedelta(minutes=1), limit=100)
    assert [j.id for j in found] == ["silent"]

    # Stale PENDING jobs are paged through, oldest first, each once.
    before = T0 + timedelta(days=1)
    seen: list[str] = []
    after: datetime | None = None
    while page := crowded.find(JobStatus.PENDING, before, 300, updated_after=after):
        seen.extend(j.id for j in page)
        after = page[-1].updated_at
    assert seen == [f"queued-{i:05d}" for i in range(BACKLOG)]

    # The sweep replays only the backlog's job whose task is gone, and announces "silent".
    queue, publisher = FakeTaskQueue(), FakePublisher()
    for job_id in seen[:-1]:  # the newest lost its task (the intake died before enqueueing)
        queue.enqueue(TaskSpec(task_name_for(job_id, 0), job_id))
    clock = FrozenClock(late + timedelta(minutes=30))
    sweeper = RecoveryService(crowded, queue, publisher, clock, Settings().budget())
    report = sweeper.sweep()
    assert report.replayed == [seen[-1]]
    assert report.announced == ["silent"]
    assert [e.job_id for e in publisher.completions()] == ["silent"]
    assert report.failed == [] and report.errors == []
    assert [t.name for t in queue.tasks[-1:]] == [task_name_for(seen[-1], 1)]
