"""A lane purge reads its jobs page by page: jobs that share an updated_at are each read,
in pages of 200, at most 100,000 a status."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, cast

from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.clock import FrozenClock
from shared.config.queues import load_queues
from shared.domain.ids import job_id_for
from shared.domain.job import GradingRequest, Job
from shared.domain.status import JobStatus
from shared.service_layer.lanes import NOT_FINAL, LaneService
from tests.fakes import FakePublisher, FakeTaskQueue


def test_a_purge_cancels_every_job_that_shares_an_updated_at_across_pages(
    tmp_path: Path,
) -> None:
    clock = FrozenClock()
    store = SqliteJobStore(SqliteDatabase(tmp_path / "jobs.sqlite3"))
    request = GradingRequest(submission_id="s", answer="a", rubric="r")
    ids = sorted(job_id_for("c", f"k{i}") for i in range(5))
    for job_id in ids:  # all stored at one moment
        store.create(Job.new(job_id, "c", request, "fp", clock.now(), lane="bulk"))
    clock.advance(timedelta(seconds=1))
    lanes = LaneService(
        store, FakeTaskQueue(), FakePublisher(), clock, load_queues(), "grading", batch=2
    )
    report = lanes.purge("bulk", by="alice")
    assert report.cancelled == ids  # oldest first, then by id: each once
    for job_id in ids:
        job = store.get(job_id)
        assert job is not None and job.status is JobStatus.CANCELLED


class EndlessStore:
    """A job store whose every status holds more jobs than a purge reads, none in its lane."""

    def __init__(self, clock: FrozenClock) -> None:
        request = GradingRequest(submission_id="s", answer="a", rubric="r")
        self.page = [
            Job.new(f"j{i:03d}", "c", request, "fp", clock.now(), lane="grading")
            for i in range(1_000)
        ]
        self.read: dict[JobStatus, list[int]] = {}

    def find(
        self,
        status: JobStatus,
        updated_before: datetime,
        limit: int,
        updated_after: datetime | None = None,
        after_id: str | None = None,
    ) -> list[Job]:
        self.read.setdefault(status, []).append(limit)
        return self.page[:limit]


def test_a_purge_reads_pages_of_200_jobs_and_at_most_100_000_a_status() -> None:
    clock = FrozenClock()
    store = EndlessStore(clock)
    lanes = LaneService(
        cast(Any, store), FakeTaskQueue(), FakePublisher(), clock, load_queues(), "grading"
    )
    assert lanes.purge("bulk", by="alice").cancelled == []
    assert store.read == {status: [200] * 500 for status in NOT_FINAL}
