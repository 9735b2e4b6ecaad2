"""Both job stores keep a job's lane, through every update, and read old jobs as laneless."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from shared.domain.job import GradingRequest, Job, JobError
from shared.domain.status import JobStatus
from shared.ports import JobStore

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_the_lane_is_stored_and_kept_through_updates(job_store: JobStore) -> None:
    job_id = f"lane-{uuid.uuid4().hex}"
    request = GradingRequest(submission_id="s", answer="a", rubric="r", lane="exam")
    job_store.create(Job.new(job_id, "client-a", request, "fp", NOW, lane="exam"))
    stored = job_store.get(job_id)
    assert stored is not None and stored.lane == "exam" and stored.request.lane == "exam"
    job_store.update(job_id, lambda j: j.claim("w", NOW, timedelta(seconds=30)))
    reason = JobError("lane-purged", "lane exam purged by alice")
    cancelled = job_store.update(job_id, lambda j: j.cancel(NOW, reason))
    assert cancelled.status is JobStatus.CANCELLED and cancelled.lane == "exam"
    again = job_store.get(job_id)
    assert again is not None and again.lane == "exam" and again.error == reason


def test_a_job_without_a_lane_reads_back_without_one(job_store: JobStore) -> None:
    job_id = f"nolane-{uuid.uuid4().hex}"
    request = GradingRequest(submission_id="s", answer="a", rubric="r")
    job_store.create(Job.new(job_id, "client-a", request, "fp", NOW))
    stored = job_store.get(job_id)
    assert stored is not None and stored.lane is None and stored.request.lane is None
