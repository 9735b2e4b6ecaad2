"""Both job stores keep a job's provider batch wait, and the batch tick finds it."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from shared.domain.errors import JobAlreadyFinal
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest, Job, ProviderBatchWait
from shared.domain.status import JobStatus
from shared.ports import JobStore

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(minutes=30)


def test_a_job_waiting_in_a_batch_is_stored_found_and_answered_once(
    job_store: JobStore,
) -> None:
    job_id = f"batch-{uuid.uuid4().hex}"
    request = GradingRequest("s", "a", "r", deadline="hours")
    job_store.create(Job.new(job_id, "client-a", request, "fp", NOW, lane="bulk"))
    job_store.update(
        job_id,
        lambda j: j.start_attempt("w", NOW, LEASE, 3).enter_batch("w", "openai", NOW, LEASE),
    )
    job_store.update(job_id, lambda j: j.submit_batch(None, "reserved/t", NOW, LEASE))
    job_store.update(job_id, lambda j: j.submit_batch("reserved/t", "batch_1", NOW, LEASE))
    stored = job_store.get(job_id)
    assert stored is not None and stored.request.deadline == "hours"
    assert stored.provider_batch == ProviderBatchWait("openai", NOW, "batch_1")
    found = job_store.find(JobStatus.RUNNING, NOW + timedelta(seconds=1), 500)
    assert job_id in {j.id for j in found if j.waits_in_batch}
    done = job_store.update(
        job_id, lambda j: j.batch_succeeded("batch_1", GradeResult(7, 10, "ok"), NOW)
    )
    assert done.status is JobStatus.SUCCEEDED and done.provider_batch is None
    with pytest.raises(JobAlreadyFinal):  # a second answer is refused, the first stays
        job_store.update(
            job_id, lambda j: j.batch_succeeded("batch_1", GradeResult(2, 10, "no"), NOW)
        )
    again = job_store.get(job_id)
    assert again is not None and again.result == GradeResult(7, 10, "ok")
