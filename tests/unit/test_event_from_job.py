"""What a final job's GradingCompleted carries, field by field."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from shared.domain.events import GradingCompleted, Outcome
from shared.domain.grade import GradeResult
from shared.domain.ids import completion_event_id
from shared.domain.job import GradingRequest, Job, JobError

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=60)


def _running() -> Job:
    request = GradingRequest(
        submission_id="sub-9",
        assignment_id="bio-101",
        answer="a",
        rubric=("c1",),
        max_score=20,
        callback_url="https://frontend.example/hook",
    )
    job = Job.new("job-9", "client-a", request, "fp", T0)
    return job.claim("owner", T0 + timedelta(seconds=1), LEASE)


def test_a_succeeded_job_carries_its_result_and_request_facts() -> None:
    result = GradeResult(15, 20, "good", grader="rubric")
    job = _running().succeed("owner", result, T0 + timedelta(seconds=3))
    event = GradingCompleted.from_job(job)
    assert event.event_id == completion_event_id("job-9")
    assert event.job_id == "job-9"
    assert event.client_id == "client-a"
    assert event.submission_id == "sub-9"
    assert event.assignment_id == "bio-101"
    assert event.outcome is Outcome.SUCCEEDED
    assert event.score == 15
    assert event.max_score == 20
    assert event.attempts == 1
    assert event.occurred_at == T0 + timedelta(seconds=3)
    assert event.data()["callback_url"] is None  # the job keeps it, with any token it holds
    assert event.error is None
    assert event.timings == job.timings()


def test_a_failed_job_carries_its_error_and_no_score() -> None:
    error = JobError("grading-permanent", "refused")
    job = _running().fail("owner", error, T0 + timedelta(seconds=2))
    event = GradingCompleted.from_job(job)
    assert event.outcome is Outcome.FAILED
    assert event.score is None
    assert event.error == {"type": "grading-permanent", "message": "refused"}


def test_a_cancelled_job_is_announced_as_cancelled() -> None:
    job = _running().cancel(T0 + timedelta(seconds=2))
    event = GradingCompleted.from_job(job)
    assert event.outcome is Outcome.CANCELLED
    assert event.score is None and event.error is None


def test_a_job_that_is_not_final_has_no_event() -> None:
    with pytest.raises(ValueError, match=r"job job-9 is not final \(RUNNING\)"):
        GradingCompleted.from_job(_running())


def test_a_final_job_without_a_completion_time_has_no_event() -> None:
    # E.g. a record damaged by hand: the event would carry no completion time.
    done = _running().succeed("owner", GradeResult(1, 20, "ok"), T0 + timedelta(seconds=2))
    damaged = dataclasses.replace(done, completed_at=None)
    with pytest.raises(ValueError, match=r"job job-9 is not final \(SUCCEEDED\)"):
        GradingCompleted.from_job(damaged)
