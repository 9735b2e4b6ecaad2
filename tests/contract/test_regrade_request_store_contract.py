"""A regrade request is kept on its job on every backend: a job stored before requests
existed reads as having none, and a request and its answer round-trip."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest, Job
from shared.domain.review import RegradeRequest, RequestAnswer, requested_state
from shared.ports import JobStore
from tests.contract.test_job_store_contract import T0


def _graded(job_store: JobStore) -> Job:
    request = GradingRequest("s1", "an answer", "light", 10.0, assignment_id="a-1")
    job = Job.new("job-1", "client-a", request, "fp", T0, author="ada")
    job = job.claim("w", T0, timedelta(minutes=1)).succeed("w", GradeResult(4, 10, "ok"), T0)
    job_store.create(job)
    return job


def test_a_job_stored_without_a_request_reads_as_none(job_store: JobStore) -> None:
    job = _graded(job_store)
    assert "regrade_request" not in job.to_record()  # the shape jobs had before requests
    stored = job_store.get(job.id)
    assert stored is not None and stored.regrade_request is None


def test_a_request_and_its_answer_round_trip(job_store: JobStore) -> None:
    job = _graded(job_store)
    at = T0 + timedelta(hours=1)
    asked = RegradeRequest("ada", at, "I named chlorophyll", 0)

    def ask(current: Job) -> Job:
        held = requested_state(current.review, current.generation, at)
        return dataclasses.replace(current, regrade_request=asked, review=held)

    job_store.update(job.id, ask)
    stored = job_store.get(job.id)
    assert stored is not None and stored.regrade_request == asked
    assert stored.review is not None and stored.review.reasons[-1].value == "regrade-request"
    answered = asked.answered(RequestAnswer.KEEP, "user:ms-t", at + timedelta(hours=1), "fair")
    job_store.update(job.id, lambda j: dataclasses.replace(j, regrade_request=answered))
    again = job_store.get(job.id)
    assert again is not None and again.regrade_request == answered
    assert not answered.is_open
