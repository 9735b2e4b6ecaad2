"""The attempt history every transition writes, and an operator's replay of a dead letter."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from shared.domain.errors import IllegalTransition, JobLocked
from shared.domain.events import GradingCompleted
from shared.domain.grade import GradeResult
from shared.domain.ids import completion_event_id
from shared.domain.job import (
    ANNOUNCE_LEASE,
    HISTORY_LIMIT,
    AttemptOutcome,
    AttemptRecord,
    GradingRequest,
    Job,
    JobError,
    ReplayRecord,
)
from shared.domain.status import JobStatus

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=60)
ERROR = JobError("grading-transient", "provider busy")
FATAL = JobError("grading-permanent", "answer unreadable")
RESULT = GradeResult(7.0, 10.0, "fine")


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def new_job() -> Job:
    request = GradingRequest(submission_id="s", answer="a", rubric=("c",), max_score=10)
    return Job.new("job-1", "client-a", request, "fp", T0)


def failed_job() -> Job:
    """Claimed at 1, failed by its attempt at 2, its failure announced at 3."""
    job = new_job().claim("w1", at(1), LEASE).fail("w1", FATAL, at(2))
    return job.mark_event_published(at(3))


def test_a_new_job_has_no_history_and_no_replays() -> None:
    job = new_job()
    assert job.history == ()
    assert job.replays == ()
    assert job.queued_at is None


def test_a_claim_opens_an_attempt_record() -> None:
    job = new_job().claim("w1", at(1), LEASE)
    assert job.history == (AttemptRecord(1, 0, "w1", at(1)),)
    assert job.history[0].ended_at is None
    assert job.history[0].outcome is AttemptOutcome.RUNNING
    assert job.history[0].error is None


def test_success_closes_the_attempt() -> None:
    job = new_job().claim("w1", at(1), LEASE).succeed("w1", RESULT, at(4))
    assert job.history == (AttemptRecord(1, 0, "w1", at(1), at(4), AttemptOutcome.SUCCEEDED, None),)


def test_a_retry_closes_the_attempt_with_its_error_and_the_next_claim_opens_another() -> None:
    job = new_job().claim("w1", at(1), LEASE).retry_later("w1", ERROR, at(2))
    assert job.history == (AttemptRecord(1, 0, "w1", at(1), at(2), AttemptOutcome.RETRY, ERROR),)
    job = job.claim("w2", at(5), LEASE)
    assert job.history[1] == AttemptRecord(2, 0, "w2", at(5))
    assert len(job.history) == 2


def test_a_failing_attempt_records_its_error() -> None:
    job = new_job().claim("w1", at(1), LEASE).fail("w1", FATAL, at(2))
    assert job.history == (AttemptRecord(1, 0, "w1", at(1), at(2), AttemptOutcome.FAILED, FATAL),)


def test_a_release_closes_the_attempt_as_released() -> None:
    job = new_job().claim("w1", at(1), LEASE).release("w1", at(2))
    assert job.history == (AttemptRecord(1, 0, "w1", at(1), at(2), AttemptOutcome.RELEASED),)


def test_a_takeover_closes_the_dead_attempt_as_lease_expired() -> None:
    job = new_job().claim("w1", at(1), LEASE).claim("w2", at(70), LEASE)
    assert job.history == (
        AttemptRecord(1, 0, "w1", at(1), at(70), AttemptOutcome.LEASE_EXPIRED),
        AttemptRecord(2, 0, "w2", at(70)),
    )


def test_the_recovery_giving_up_closes_an_open_attempt_as_lease_expired() -> None:
    job = new_job().claim("w1", at(1), LEASE).fail(None, FATAL, at(70))
    assert job.history == (
        AttemptRecord(1, 0, "w1", at(1), at(70), AttemptOutcome.LEASE_EXPIRED, None),
    )


def test_the_recovery_giving_up_on_a_waiting_job_leaves_its_closed_history() -> None:
    waiting = new_job().claim("w1", at(1), LEASE).retry_later("w1", ERROR, at(2))
    assert waiting.fail(None, FATAL, at(90)).history == waiting.history


def test_a_cancel_closes_the_running_attempt() -> None:
    job = new_job().claim("w1", at(1), LEASE).cancel(at(3))
    assert job.history == (AttemptRecord(1, 0, "w1", at(1), at(3), AttemptOutcome.CANCELLED),)
    assert new_job().cancel(at(3)).history == ()


def test_a_renewal_leaves_the_history_alone() -> None:
    job = new_job().claim("w1", at(1), LEASE)
    assert job.renew("w1", at(20), LEASE).history == job.history


def test_the_history_keeps_only_the_newest_attempts() -> None:
    job = new_job()
    for n in range(HISTORY_LIMIT + 3):
        job = job.claim("w", at(10 * n), LEASE).retry_later("w", ERROR, at(10 * n + 1))
    assert len(job.history) == HISTORY_LIMIT
    assert job.history[0].number == 4
    assert job.history[-1].number == HISTORY_LIMIT + 3


def test_history_and_replays_survive_the_record_round_trip() -> None:
    job = failed_job().replay_failed(at(10), "ops@example")
    job = job.claim("w2", at(11), LEASE).retry_later("w2", ERROR, at(12))
    record = job.to_record()
    assert record["history"][0]["started_at"] == at(1).isoformat()
    assert record["replays"][0]["by"] == "ops@example"
    assert record["queued_at"] == at(10)
    assert Job.from_record(record) == job


def test_a_record_from_before_histories_reads_as_an_empty_one() -> None:
    record = new_job().to_record()
    for key in ("history", "replays", "queued_at"):
        del record[key]
    job = Job.from_record(record)
    assert (job.history, job.replays, job.queued_at) == ((), (), None)


# --- an operator's replay of a failed job --------------------------------------------


def test_replay_failed_puts_the_job_back_as_a_new_generation_with_a_fresh_budget() -> None:
    failed = failed_job()
    replayed = failed.replay_failed(at(10), "ops@example")
    assert replayed.status is JobStatus.PENDING
    assert replayed.generation == failed.generation + 1 == 1
    assert replayed.attempts == 0
    assert replayed.updated_at == at(10)
    assert replayed.queued_at == at(10)
    assert replayed.started_at is None
    assert replayed.attempt_started_at is None
    assert replayed.completed_at is None
    assert replayed.lease_owner is None
    assert replayed.lease_expires_at is None
    assert replayed.result is None
    assert replayed.error is None
    assert replayed.event_published is False
    assert replayed.history == failed.history
    assert replayed.replays == (ReplayRecord(at(10), "ops@example", 1, FATAL, 1),)
    assert replayed.lifetime_attempts == 1
    assert replayed.created_at == failed.created_at


def test_a_second_replay_is_recorded_after_the_first() -> None:
    once = failed_job().replay_failed(at(10), "a")
    again = once.claim("w", at(11), LEASE).fail("w", ERROR, at(12)).mark_event_published(at(13))
    twice = again.replay_failed(at(20), "b")
    assert twice.replays == (
        ReplayRecord(at(10), "a", 1, FATAL, 1),
        ReplayRecord(at(20), "b", 2, ERROR, 1),
    )
    assert twice.claim("w", at(21), LEASE).lifetime_attempts == 3
    assert twice.generation == 2
    assert [a.generation for a in twice.history] == [0, 1]


@pytest.mark.parametrize("status", [s for s in JobStatus if s is not JobStatus.FAILED], ids=str)
def test_only_a_failed_job_can_be_replayed_by_an_operator(status: JobStatus) -> None:
    job = dataclasses.replace(new_job(), status=status)
    with pytest.raises(IllegalTransition) as raised:
        job.replay_failed(at(10), "ops")
    assert raised.value.current is status
    assert raised.value.target is JobStatus.PENDING


def test_a_failure_still_being_announced_is_not_replayed() -> None:
    failing = new_job().claim("w1", at(1), LEASE).fail("w1", FATAL, at(2))
    with pytest.raises(JobLocked) as raised:
        failing.replay_failed(at(2) + ANNOUNCE_LEASE - timedelta(microseconds=1), "ops")
    assert raised.value.until == at(2) + ANNOUNCE_LEASE
    assert failing.replay_failed(at(2) + ANNOUNCE_LEASE, "ops").status is JobStatus.PENDING


def test_a_replayed_job_is_timed_from_its_replay() -> None:
    replayed = failed_job().replay_failed(at(100), "ops")
    done = replayed.claim("w", at(103), LEASE).succeed("w", RESULT, at(110))
    assert done.timings() == {"queue_wait_ms": 3000, "processing_ms": 7000, "total_ms": 10000}


def test_the_recovery_replay_budget_counts_from_the_operator_replay() -> None:
    job = new_job().replay(at(1)).replay(at(2))
    assert job.recovery_replays == 2
    failed = job.claim("w", at(3), LEASE).fail("w", FATAL, at(4)).mark_event_published(at(5))
    replayed = failed.replay_failed(at(6), "ops")
    assert replayed.replayed_generation == 3
    assert replayed.recovery_replays == 0
    assert replayed.replay(at(7)).recovery_replays == 1


def test_a_replayed_job_announces_under_a_new_event_id() -> None:
    replayed = failed_job().replay_failed(at(10), "ops")
    done = replayed.claim("w", at(11), LEASE).succeed("w", RESULT, at(12))
    event = GradingCompleted.from_job(done)
    assert event.event_id == completion_event_id("job-1", 1)
    assert event.event_id != completion_event_id("job-1")
    assert completion_event_id("job-1", 0) == completion_event_id("job-1")
    assert completion_event_id("job-1", 1) != completion_event_id("job-1", 2)


def test_an_open_attempt_and_an_old_replay_record_survive_the_round_trip() -> None:
    job = new_job().claim("w1", at(1), LEASE)
    assert job.to_record()["history"][0]["ended_at"] is None
    assert Job.from_record(job.to_record()) == job
    record = ReplayRecord(at(1), "ops", 1).to_dict()
    del record["attempts"]
    assert ReplayRecord.from_dict(record) == ReplayRecord(at(1), "ops", 1, None, 0)


def test_a_running_job_is_refused_as_a_transition_not_as_locked() -> None:
    job = new_job().claim("w1", at(1), LEASE)
    with pytest.raises(IllegalTransition) as raised:
        job.replay_failed(at(2), "ops")
    assert raised.value.current is JobStatus.RUNNING


def test_an_unannounced_failure_is_replayed_once_its_lease_has_run_out() -> None:
    failing = new_job().claim("w1", at(1), LEASE).fail("w1", FATAL, at(2))
    assert failing.lease_owner == "w1" and not failing.event_published
    replayed = failing.replay_failed(at(2) + ANNOUNCE_LEASE, "ops")
    assert replayed.lease_owner is None
    assert replayed.lease_expires_at is None


def test_the_locked_replay_names_the_job() -> None:
    failing = new_job().claim("w1", at(1), LEASE).fail("w1", FATAL, at(2))
    with pytest.raises(JobLocked) as raised:
        failing.replay_failed(at(3), "ops")
    until = (at(2) + ANNOUNCE_LEASE).isoformat()
    assert raised.value.detail == f"job job-1 is leased until {until}"


def test_replayed_jobs_announce_under_ids_of_their_own() -> None:
    assert completion_event_id("job-1", 1) != completion_event_id("job-2", 1)


def test_a_failed_job_is_processed_from_its_first_attempt() -> None:
    job = new_job().claim("w1", at(1), LEASE).retry_later("w1", ERROR, at(2))
    failed = job.claim("w2", at(5), LEASE).fail("w2", FATAL, at(9))
    assert failed.timings()["processing_ms"] == 8000
