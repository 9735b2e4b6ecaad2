"""Every decision of the job's state machine, pinned: the table, the guards, what each
transition writes, the timings and the persisted record."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from shared.domain.errors import IllegalTransition, JobAlreadyFinal, JobLocked, LeaseLost
from shared.domain.grade import GradeResult
from shared.domain.job import ANNOUNCE_LEASE, TRANSITIONS, GradingRequest, Job, JobError
from shared.domain.status import JobStatus

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=60)
S = JobStatus

ALLOWED = {
    (S.PENDING, S.RUNNING),
    (S.PENDING, S.CANCELLED),
    (S.PENDING, S.FAILED),
    (S.RETRYING, S.RUNNING),
    (S.RETRYING, S.CANCELLED),
    (S.RETRYING, S.FAILED),
    (S.RUNNING, S.RUNNING),
    (S.RUNNING, S.RETRYING),
    (S.RUNNING, S.SUCCEEDED),
    (S.RUNNING, S.FAILED),
    (S.RUNNING, S.CANCELLED),
    (S.FAILED, S.PENDING),  # an operator's replay of a dead letter, or a regrade
    (S.SUCCEEDED, S.PENDING),  # an assignment's regrade
}
ERROR = JobError("grading-transient", "provider busy")


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def new_job() -> Job:
    request = GradingRequest(submission_id="s", answer="a", rubric=("c",), max_score=10)
    return Job.new("job-1", "client-a", request, "fp", T0)


def running(owner: str = "w1", now: float = 1) -> Job:
    return new_job().claim(owner, at(now), LEASE)


def in_state(status: JobStatus) -> Job:
    return dataclasses.replace(new_job(), status=status)


def test_the_table_is_exactly_the_documented_one() -> None:
    table = {(a, b) for a, targets in TRANSITIONS.items() for b in targets}
    assert table == ALLOWED
    assert set(TRANSITIONS) == set(JobStatus)


@pytest.mark.parametrize(("source", "target"), list(itertools.product(JobStatus, JobStatus)))
def test_every_pair_is_allowed_or_refused_by_the_table(
    source: JobStatus, target: JobStatus
) -> None:
    job = in_state(source)
    if (source, target) in ALLOWED:
        moved = job._to(target, at(5))
        assert moved.status is target
        assert moved.updated_at == at(5)
    else:
        with pytest.raises(IllegalTransition) as raised:
            job._to(target, at(5))
        assert raised.value.current is source
        assert raised.value.target is target
        assert raised.value.detail == f"job job-1 cannot go from {source} to {target}"


def test_claim_writes_the_attempt_and_its_lease() -> None:
    job = running("w1", now=3)
    assert job.status is S.RUNNING
    assert job.attempts == 1
    assert job.started_at == at(3)
    assert job.attempt_started_at == at(3)
    assert job.lease_owner == "w1"
    assert job.lease_expires_at == at(3) + LEASE
    assert job.updated_at == at(3)


def test_a_second_claim_keeps_the_first_start_and_counts_again() -> None:
    retried = running("w1", now=1).retry_later("w1", ERROR, at(2))
    again = retried.claim("w2", at(10), LEASE)
    assert again.attempts == 2
    assert again.started_at == at(1)
    assert again.attempt_started_at == at(10)


def test_a_live_lease_of_another_owner_refuses_the_claim() -> None:
    job = running("w1", now=1)
    with pytest.raises(JobLocked) as raised:
        job.claim("w2", at(30), LEASE)
    assert raised.value.until == at(1) + LEASE
    assert raised.value.detail.startswith("job job-1 is leased until")
    assert job.claim("w1", at(30), LEASE).attempts == 2  # the owner may claim again


def test_a_lease_expires_exactly_at_its_end() -> None:
    job = running("w1", now=0)
    assert job.lease_is_live(at(59.999))
    assert not job.lease_is_live(at(60))
    assert job.claim("w2", at(60), LEASE).lease_owner == "w2"


@pytest.mark.parametrize("status", [S.SUCCEEDED, S.FAILED, S.CANCELLED])
def test_final_jobs_refuse_claim_cancel_and_replay_naming_their_status(
    status: JobStatus,
) -> None:
    job = in_state(status)
    actions: tuple[Callable[[], Job], ...] = (
        lambda: job.claim("w", at(1), LEASE),
        lambda: job.cancel(at(1)),
        lambda: job.replay(at(1)),
    )
    for action in actions:
        with pytest.raises(JobAlreadyFinal) as raised:
            action()
        assert raised.value.job_status is status
        assert raised.value.detail == f"job job-1 is already {status}"


def test_retry_later_frees_the_lease_and_keeps_the_error() -> None:
    job = running("w1").retry_later("w1", ERROR, at(4))
    assert job.status is S.RETRYING
    assert job.lease_owner is None and job.lease_expires_at is None
    assert job.error == ERROR
    assert job.updated_at == at(4)


def test_an_attempt_that_lost_its_lease_cannot_record_anything() -> None:
    job = running("w1", now=0).claim("w2", at(61), LEASE)  # taken over
    result = GradeResult(1, 10, "late")
    actions: tuple[Callable[[], Job], ...] = (
        lambda: job.succeed("w1", result, at(62)),
        lambda: job.retry_later("w1", ERROR, at(62)),
        lambda: job.fail("w1", ERROR, at(62)),
    )
    for action in actions:
        with pytest.raises(LeaseLost) as raised:
            action()
        assert raised.value.detail == "attempt w1 no longer owns job job-1"


def test_success_keeps_the_owner_on_a_short_announce_lease() -> None:
    result = GradeResult(8, 10, "good", grader="rubric")
    job = running("w1").succeed("w1", result, at(7))
    assert job.status is S.SUCCEEDED
    assert job.result == result and job.error is None
    assert job.completed_at == at(7)
    assert job.lease_owner == "w1"
    assert job.lease_expires_at == at(7) + ANNOUNCE_LEASE


def test_the_sweep_fails_a_job_as_recovery_unless_a_lease_lives() -> None:
    stale = running("w1", now=0)
    with pytest.raises(JobLocked):
        stale.fail(None, ERROR, at(30))
    failed = stale.fail(None, ERROR, at(61))
    assert failed.status is S.FAILED
    assert failed.lease_owner == "recovery"
    assert failed.error == ERROR
    assert failed.completed_at == at(61)


def test_an_attempt_fails_its_job_in_its_own_name() -> None:
    assert running("w1").fail("w1", ERROR, at(5)).lease_owner == "w1"


def test_cancel_holds_the_announce_lease_as_cancel() -> None:
    job = new_job().cancel(at(2))
    assert job.status is S.CANCELLED
    assert job.lease_owner == "cancel"
    assert job.lease_expires_at == at(2) + ANNOUNCE_LEASE
    assert running("w1").cancel(at(3)).status is S.CANCELLED
    assert in_state(S.RETRYING).cancel(at(3)).status is S.CANCELLED


def test_marking_published_frees_the_lease_and_touches_the_job() -> None:
    done = running("w1").succeed("w1", GradeResult(1, 10, "f"), at(5))
    marked = done.mark_event_published(at(6))
    assert marked.event_published is True
    assert marked.lease_owner is None and marked.lease_expires_at is None
    assert marked.updated_at == at(6)
    assert marked.status is S.SUCCEEDED


def test_only_final_jobs_can_be_marked_published() -> None:
    with pytest.raises(IllegalTransition) as raised:
        running("w1").mark_event_published(at(5))
    assert raised.value.current is S.RUNNING and raised.value.target is S.RUNNING
    assert raised.value.detail == "job job-1 cannot go from RUNNING to RUNNING"


def test_replay_starts_a_new_generation_and_touches_the_job() -> None:
    replayed = in_state(S.RETRYING).replay(at(9))
    assert replayed.generation == 1
    assert replayed.updated_at == at(9)  # the sweep selects on it
    assert replayed.status is S.RETRYING


def test_timings_of_a_success_count_the_last_attempt_only() -> None:
    job = running("w1", now=2).retry_later("w1", ERROR, at(3)).claim("w2", at(10), LEASE)
    done = job.succeed("w2", GradeResult(1, 10, "f"), at(14))
    assert done.timings() == {"queue_wait_ms": 2000, "processing_ms": 4000, "total_ms": 14000}


def test_timings_of_a_failure_count_from_the_first_start() -> None:
    failed = running("w1", now=2).fail("w1", ERROR, at(14))
    assert failed.timings() == {"queue_wait_ms": 2000, "processing_ms": 12000, "total_ms": 14000}


def test_timings_are_zero_not_negative_and_none_before_they_exist() -> None:
    instant = running("w1", now=0).succeed("w1", GradeResult(1, 10, "f"), at(0))
    assert instant.timings() == {"queue_wait_ms": 0, "processing_ms": 0, "total_ms": 0}
    skewed = dataclasses.replace(instant, completed_at=at(-1))
    assert skewed.timings()["total_ms"] == 0
    assert new_job().timings() == {"queue_wait_ms": None, "processing_ms": None, "total_ms": None}


#: A job's record as the first version stored it: none of the fields added since.
MINIMAL_RECORD = {
    "id": "j",
    "client_id": "c",
    "request": {"submission_id": "s", "answer": "a", "rubric": "one; two"},
    "fingerprint": "fp",
    "status": "PENDING",
    "created_at": T0,
    "updated_at": T0,
}


def test_a_minimal_old_record_reads_with_the_defaults() -> None:
    job = Job.from_record(dict(MINIMAL_RECORD))
    assert (job.attempts, job.generation, job.event_published) == (0, 0, False)
    assert job.request.max_score == 10.0
    assert job.request.assignment_id is None and job.request.callback_url is None
    assert job.request.metadata == {}
    assert job.request.rubric == "one; two"
    assert job.result is None and job.error is None


def test_a_full_record_round_trips() -> None:
    request = GradingRequest(
        submission_id="s",
        answer="a",
        rubric=("c1", "c2"),
        max_score=20,
        assignment_id="bio",
        callback_url="https://x.example/h",
        metadata={"k": "v"},
    )
    result = GradeResult(
        7, 20, "f", criteria=({"criterion": "c1", "met": True},), grader="gemini", model="m"
    )
    job = dataclasses.replace(
        running("w1"),
        request=request,
        generation=2,
        status=S.SUCCEEDED,
        result=result,
        error=ERROR,
        event_published=True,
    )
    record = job.to_record()
    assert record["request"]["rubric"] == ["c1", "c2"]
    assert record["result"]["criteria"] == [{"criterion": "c1", "met": True}]
    assert record["result"]["grader"] == "gemini"
    assert Job.from_record(record) == job


def test_a_result_without_optional_fields_reads_with_defaults() -> None:
    result = GradeResult.from_dict({"score": 3, "max_score": 10, "feedback": "f"})
    assert result == GradeResult(3.0, 10.0, "f")
    assert result.criteria == () and result.grader == "" and result.usage == {}
