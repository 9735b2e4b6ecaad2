"""The one state machine: legal transitions, leases, timings."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.domain.errors import IllegalTransition, JobAlreadyFinal, JobLocked, LeaseLost
from shared.domain.grade import GradeResult
from shared.domain.ids import completion_event_id, job_id_for, task_name_for
from shared.domain.job import ANNOUNCE_LEASE, TRANSITIONS, GradingRequest, Job, JobError
from shared.domain.status import JobStatus

T0 = datetime(2026, 5, 1, tzinfo=UTC)
LEASE = timedelta(seconds=60)
RESULT = GradeResult(5, 10, "ok")
ERR = JobError("x", "boom")


def pending() -> Job:
    request = GradingRequest(submission_id="s", answer="a", rubric="r")
    return Job.new("j", "c", request, "fp", T0)


def running(owner: str = "w1") -> Job:
    return pending().claim(owner, T0 + timedelta(seconds=2), LEASE)


def test_final_states_have_no_way_out_but_a_replay_or_a_regrade() -> None:
    for status in JobStatus:
        if status in (JobStatus.FAILED, JobStatus.SUCCEEDED):
            assert TRANSITIONS[status] == frozenset({JobStatus.PENDING})
        else:
            assert (TRANSITIONS[status] == frozenset()) == status.is_final


def test_claim_takes_a_lease_and_counts_the_attempt() -> None:
    job = running()
    assert job.status is JobStatus.RUNNING
    assert job.attempts == 1
    assert job.lease_expires_at == T0 + timedelta(seconds=2) + LEASE
    assert job.started_at == T0 + timedelta(seconds=2)


def test_second_claim_is_refused_while_the_lease_lives() -> None:
    with pytest.raises(JobLocked):
        running().claim("w2", T0 + timedelta(seconds=10), LEASE)


def test_expired_lease_is_taken_over_and_the_old_owner_loses() -> None:
    taken = running().claim("w2", T0 + LEASE * 2, LEASE)
    assert taken.lease_owner == "w2" and taken.attempts == 2
    with pytest.raises(LeaseLost):
        taken.succeed("w1", RESULT, T0 + LEASE * 2)


def test_success_keeps_a_short_announce_lease_and_records_timings() -> None:
    done = running().succeed("w1", RESULT, T0 + timedelta(seconds=7))
    assert done.status is JobStatus.SUCCEEDED
    assert done.lease_owner == "w1"
    assert done.lease_expires_at == T0 + timedelta(seconds=7) + ANNOUNCE_LEASE
    published = done.mark_event_published(T0 + timedelta(seconds=8))
    assert published.lease_owner is None and published.lease_expires_at is None
    assert done.timings() == {"queue_wait_ms": 2000, "processing_ms": 5000, "total_ms": 7000}


def test_retry_then_claim_again() -> None:
    retrying = running().retry_later("w1", ERR, T0 + timedelta(seconds=3))
    assert retrying.status is JobStatus.RETRYING and retrying.error == ERR
    again = retrying.claim("w2", T0 + timedelta(seconds=20), LEASE)
    assert again.attempts == 2 and again.started_at == T0 + timedelta(seconds=2)


def test_final_jobs_refuse_claims_and_cancels() -> None:
    done = running().succeed("w1", RESULT, T0 + timedelta(seconds=7))
    with pytest.raises(JobAlreadyFinal):
        done.claim("w2", T0 + LEASE * 3, LEASE)
    with pytest.raises(JobAlreadyFinal):
        done.cancel(T0)


def test_pending_cannot_succeed_or_retry() -> None:
    with pytest.raises(LeaseLost):
        pending().succeed("w1", RESULT, T0)
    with pytest.raises(LeaseLost):
        pending().retry_later("w1", ERR, T0)


def test_recovery_cannot_fail_a_job_with_a_live_lease() -> None:
    with pytest.raises(JobLocked):
        running().fail(None, ERR, T0 + timedelta(seconds=3))
    failed = running().fail(None, ERR, T0 + LEASE * 2)
    assert failed.status is JobStatus.FAILED


def test_event_marker_only_on_final_jobs() -> None:
    with pytest.raises(IllegalTransition):
        pending().mark_event_published(T0)
    assert pending().cancel(T0).mark_event_published(T0).event_published


def test_ids_are_stable_url_safe_and_scoped() -> None:
    a = job_id_for("client-a", "key-1")
    assert a == job_id_for("client-a", "key-1")
    assert a != job_id_for("client-b", "key-1")
    assert a.isalnum() and a.islower() and len(a) == 32  # 160 bits in base32
    assert task_name_for(a, 0) != task_name_for(a, 1)
    assert completion_event_id(a) == completion_event_id(a)


def test_record_round_trip() -> None:
    job = running().succeed("w1", RESULT, T0 + timedelta(seconds=7))
    assert Job.from_record(job.to_record()) == job
