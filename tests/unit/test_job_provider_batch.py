"""The state machine's part of batch mode: gathered, submitted, answered or handed back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.domain.errors import IllegalTransition, JobAlreadyFinal, LeaseLost
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest, Job, JobError, ProviderBatchWait
from shared.domain.status import JobStatus

T0 = datetime(2026, 5, 1, tzinfo=UTC)
LEASE = timedelta(seconds=45)
GATHER = timedelta(minutes=20)
WINDOW = timedelta(hours=25)
RESULT = GradeResult(7, 10, "ok")
EXPIRED = JobError("provider-batch-expired", "the provider's batch expired")


def gathered(owner: str = "w1") -> Job:
    request = GradingRequest("s", "an answer", "r", deadline="hours")
    job = Job.new("j", "c", request, "fp", T0, lane="bulk")
    claimed = job.start_attempt(owner, T0, LEASE, max_attempts=3)
    return claimed.enter_batch(owner, "openai", T0, GATHER)


def submitted(batch_id: str = "batch_1") -> Job:
    reserved = gathered().submit_batch(None, "pending/t1", T0, GATHER)
    return reserved.submit_batch("pending/t1", batch_id, T0 + timedelta(minutes=1), WINDOW)


def test_a_gathered_job_stays_running_under_a_lease_that_outlasts_the_gathering() -> None:
    job = gathered()
    assert job.status is JobStatus.RUNNING
    assert job.attempts == 1  # the batch's grading counts as the attempt
    assert job.lease_expires_at == T0 + GATHER
    assert job.provider_batch == ProviderBatchWait("openai", T0, None)
    assert job.waits_in_batch


def test_only_the_gatherer_that_reserved_a_job_submits_it() -> None:
    reserved = gathered().submit_batch(None, "pending/t1", T0, GATHER)
    with pytest.raises(LeaseLost):
        reserved.submit_batch(None, "pending/t2", T0, GATHER)
    with pytest.raises(LeaseLost):
        reserved.submit_batch("pending/t2", "batch_2", T0, WINDOW)
    done = reserved.submit_batch("pending/t1", "batch_1", T0 + timedelta(minutes=1), WINDOW)
    assert done.provider_batch is not None
    assert done.provider_batch.batch_id == "batch_1"
    assert done.provider_batch.since == T0 + timedelta(minutes=1)
    assert done.lease_expires_at == T0 + timedelta(minutes=1) + WINDOW


def test_the_batch_answer_finishes_the_job_once() -> None:
    job = submitted()
    done = job.batch_succeeded("batch_1", RESULT, T0 + timedelta(hours=2))
    assert done.status is JobStatus.SUCCEEDED
    assert done.result == RESULT
    assert done.provider_batch is None
    assert done.history[-1].outcome.value == "succeeded"
    with pytest.raises(JobAlreadyFinal):
        done.batch_succeeded("batch_1", RESULT, T0 + timedelta(hours=2))


def test_another_batch_answer_is_refused() -> None:
    with pytest.raises(LeaseLost):
        submitted("batch_1").batch_succeeded("batch_9", RESULT, T0)
    with pytest.raises(LeaseLost):
        gathered().batch_succeeded("batch_1", RESULT, T0)


def test_a_failed_batch_returns_the_job_to_its_queue_with_its_attempt_counted() -> None:
    job = submitted()
    back = job.leave_batch("batch_1", EXPIRED, T0 + timedelta(hours=25))
    assert back.status is JobStatus.RETRYING
    assert back.attempts == 1
    assert back.error == EXPIRED
    assert back.lease_owner is None and back.lease_expires_at is None
    assert back.provider_batch is None and back.batch_returned
    # A new task name: the task that handed the job to the batch was deleted.
    assert back.task_name != job.task_name
    assert back.history[-1].outcome.value == "retry"
    # Graded one by one from now on: the next claim cannot go back into a batch.
    again = back.start_attempt("w2", T0 + timedelta(hours=26), LEASE, max_attempts=3)
    with pytest.raises(IllegalTransition):
        again.enter_batch("w2", "openai", T0 + timedelta(hours=26), GATHER)


def test_a_takeover_or_replay_ends_the_wait_and_refuses_the_late_answer() -> None:
    job = submitted()
    late = T0 + WINDOW + timedelta(hours=1)
    taken = job.start_attempt("w2", late, LEASE, max_attempts=3)
    assert taken.provider_batch is None and not taken.waits_in_batch
    with pytest.raises(LeaseLost):
        taken.batch_succeeded("batch_1", RESULT, late)
    replayed = job.replay(late)
    assert replayed.provider_batch is None


def test_a_cancelled_job_takes_no_batch_answer() -> None:
    cancelled = submitted().cancel(T0 + timedelta(hours=1))
    assert cancelled.provider_batch is None
    with pytest.raises(JobAlreadyFinal):
        cancelled.batch_succeeded("batch_1", RESULT, T0 + timedelta(hours=2))


def test_the_wait_survives_the_store_record() -> None:
    job = submitted()
    assert Job.from_record(job.to_record()) == job
    back = job.leave_batch("batch_1", EXPIRED, T0)
    assert Job.from_record(back.to_record()) == back
    assert GradingRequest.from_dict(job.request.to_dict()).deadline == "hours"
    # A request naming no deadline keeps the fingerprint it had.
    assert "deadline" not in GradingRequest("s", "a", "r").to_dict()
