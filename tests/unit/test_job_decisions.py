"""The job's refusals and derived timings, pinned value by value."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from shared.domain.errors import IllegalTransition, JobAlreadyFinal, JobLocked, LeaseLost
from shared.domain.grade import GradeResult
from shared.domain.ids import task_name_for
from shared.domain.job import ANNOUNCE_LEASE, GradingRequest, Job, JobError, ReplayRecord
from shared.domain.review import (
    HoldReason,
    Release,
    Review,
    ReviewDecision,
    ReviewState,
    ReviewStatus,
)
from shared.domain.status import JobStatus

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=30)
REQUEST = GradingRequest(submission_id="s", answer="a", rubric="r")


def _new() -> Job:
    return Job.new("job-7", "c", REQUEST, "fp", T0)


def test_a_final_job_refuses_another_attempt_naming_itself_and_its_status() -> None:
    done = _new().cancel(T0)
    with pytest.raises(JobAlreadyFinal) as refused:
        done.start_attempt("w", T0, LEASE, 3)
    assert refused.value.detail == f"job job-7 is already {JobStatus.CANCELLED}"
    assert refused.value.job_status is JobStatus.CANCELLED


def test_the_sweep_cannot_fail_a_job_under_a_live_lease() -> None:
    running = _new().claim("w", T0, LEASE)
    error = JobError("retries-exhausted", "gave up")
    with pytest.raises(JobLocked) as refused:
        running.fail(None, error, T0 + LEASE - timedelta(microseconds=1))
    assert refused.value.until == T0 + LEASE
    assert refused.value.detail == f"job job-7 is leased until {(T0 + LEASE).isoformat()}"
    failed = running.fail(None, error, T0 + LEASE)
    assert failed.status is JobStatus.FAILED and failed.lease_owner == "recovery"


def test_a_failed_jobs_processing_time_spans_all_its_attempts() -> None:
    first = _new().claim("w1", T0 + timedelta(seconds=1), LEASE)
    error = JobError("grading-transient", "busy")
    back = first.retry_later("w1", error, T0 + timedelta(seconds=2))
    second = back.claim("w2", T0 + timedelta(seconds=10), LEASE)
    failed = second.fail("w2", error, T0 + timedelta(seconds=12))
    assert failed.timings() == {"queue_wait_ms": 1000, "processing_ms": 11000, "total_ms": 12000}
    succeeded = second.succeed("w2", GradeResult(1, 10, "ok"), T0 + timedelta(seconds=12))
    # A success counts only the attempt that produced the result.
    assert succeeded.timings() == {
        "queue_wait_ms": 1000,
        "processing_ms": 2000,
        "total_ms": 12000,
    }


def test_a_requests_dict_is_a_copy_down_to_nested_metadata() -> None:
    request = GradingRequest(
        submission_id="s", answer="a", rubric=("c1", "c2"), metadata={"course": {"id": "x"}}
    )
    data = request.to_dict()
    data["metadata"]["course"]["id"] = "changed"
    data["rubric"].append("c3")
    assert request.metadata == {"course": {"id": "x"}}
    assert request.rubric == ("c1", "c2")
    assert GradingRequest.from_dict(request.to_dict()) == request


def _in_batch() -> Job:
    gathered = _new().start_attempt("w", T0, LEASE, 3).enter_batch("w", "openai", T0, LEASE)
    reserved = gathered.submit_batch(None, "pending/t1", T0, LEASE)
    return reserved.submit_batch("pending/t1", "batch_1", T0, LEASE)


def test_a_job_leaving_its_batch_moves_its_task_name_on_by_one_deferral() -> None:
    waiting = _in_batch()
    back = waiting.leave_batch("batch_1", JobError("provider-batch-expired", "expired"), T0)
    assert (waiting.deferrals, back.deferrals) == (0, 1)
    assert back.task_name == task_name_for("job-7", 0, 1)
    again = back.start_attempt("w2", T0, LEASE, 3).defer("w2", T0)
    assert again.deferrals == 2 and again.task_name == task_name_for("job-7", 0, 2)


def test_each_step_into_a_batch_stamps_the_job_as_updated() -> None:
    gathered = _new().start_attempt("w", T0, LEASE, 3).enter_batch("w", "openai", T0, LEASE)
    reserved = gathered.submit_batch(None, "pending/t1", T0 + timedelta(seconds=1), LEASE)
    assert reserved.updated_at == T0 + timedelta(seconds=1)
    later = T0 + timedelta(seconds=2)
    assert reserved.submit_batch("pending/t1", "batch_1", later, LEASE).updated_at == later


def test_an_answer_from_another_batch_is_refused_naming_the_job_and_the_batch() -> None:
    with pytest.raises(LeaseLost) as refused:
        _in_batch().batch_succeeded("batch_9", GradeResult(1, 10, "ok"), T0)
    assert refused.value.detail == "attempt batch batch_9 no longer owns job job-7"


def test_a_final_job_refuses_a_batch_answer_naming_itself_and_its_status() -> None:
    cancelled = _in_batch().cancel(T0)
    with pytest.raises(JobAlreadyFinal) as refused:
        cancelled.batch_succeeded("batch_1", GradeResult(1, 10, "ok"), T0)
    assert refused.value.detail == f"job job-7 is already {JobStatus.CANCELLED}"
    assert refused.value.job_status is JobStatus.CANCELLED


def test_entering_a_batch_stamps_the_job_as_updated() -> None:
    claimed = _new().start_attempt("w", T0, LEASE, 3)
    later = T0 + timedelta(seconds=3)
    gathered = claimed.enter_batch("w", "openai", later, LEASE)
    assert gathered.updated_at == later and gathered.lease_expires_at == later + LEASE


def test_a_job_returned_from_a_batch_cannot_enter_another_naming_itself_and_its_status() -> None:
    back = _in_batch().leave_batch("batch_1", JobError("provider-batch-expired", "x"), T0)
    again = back.start_attempt("w2", T0, LEASE, 3)
    with pytest.raises(IllegalTransition) as refused:
        again.enter_batch("w2", "openai", T0, LEASE)
    running = JobStatus.RUNNING
    assert refused.value.detail == f"job job-7 cannot go from {running} to {running}"
    assert (refused.value.current, refused.value.target) == (running, running)


def _published(job: Job) -> Job:
    return job.mark_event_published(T0)


def test_a_regrade_of_a_job_returned_from_a_batch_may_go_into_a_batch_again() -> None:
    back = _in_batch().leave_batch("batch_1", JobError("provider-batch-expired", "x"), T0)
    done = _published(
        back.start_attempt("w2", T0, LEASE, 3).succeed("w2", GradeResult(1, 10, "ok"), T0)
    )
    assert done.batch_returned
    regraded = done.regrade(T0, REQUEST)
    assert not regraded.batch_returned
    gathered = regraded.start_attempt("w3", T0, LEASE, 3).enter_batch("w3", "openai", T0, LEASE)
    assert gathered.waits_in_batch


def test_the_model_grades_leave_out_a_generation_that_failed_before_its_regrade() -> None:
    failed = _published(_new().start_attempt("w", T0, LEASE, 3).fail("w", JobError("e", "x"), T0))
    regraded = failed.regrade(T0, REQUEST)
    grade = GradeResult(7, 10, "ok")
    done = regraded.start_attempt("w2", T0, LEASE, 3).succeed("w2", grade, T0)
    assert done.model_grades() == [(1, None, grade)]


def test_a_job_not_yet_final_refuses_a_regrade_naming_itself_and_both_statuses() -> None:
    with pytest.raises(IllegalTransition) as refused:
        _new().regrade(T0, REQUEST)
    pending = JobStatus.PENDING
    assert refused.value.detail == f"job job-7 cannot go from {pending} to {pending}"
    assert (refused.value.current, refused.value.target) == (pending, pending)


def test_a_regrade_waits_for_the_final_event_until_the_announce_lease_ends() -> None:
    done = _new().start_attempt("w", T0, LEASE, 3).succeed("w", GradeResult(1, 10, "ok"), T0)
    with pytest.raises(JobLocked) as refused:
        done.regrade(T0 + timedelta(seconds=1), REQUEST)
    until = T0 + ANNOUNCE_LEASE
    assert refused.value.until == until
    assert refused.value.detail == f"job job-7 is leased until {until.isoformat()}"


def test_a_regrade_of_an_unannounced_job_without_a_lease_waits_from_now() -> None:
    done = _new().start_attempt("w", T0, LEASE, 3).succeed("w", GradeResult(1, 10, "ok"), T0)
    unleased = dataclasses.replace(done, lease_owner=None, lease_expires_at=None)
    later = T0 + timedelta(seconds=5)
    with pytest.raises(JobLocked) as refused:
        unleased.regrade(later, REQUEST)
    assert refused.value.until == later
    assert refused.value.detail == f"job job-7 is leased until {later.isoformat()}"


def test_a_regrade_of_a_failed_job_records_why_it_had_failed() -> None:
    error = JobError("grading-failed", "no answer")
    failed = _published(_new().start_attempt("w", T0, LEASE, 3).fail("w", error, T0))
    later = T0 + timedelta(seconds=9)
    regraded = failed.regrade(later, REQUEST, by="teacher-1")
    assert regraded.replays == (ReplayRecord(later, "teacher-1", 1, error, 1, None, None),)
    assert regraded.error is None and regraded.status is JobStatus.PENDING


def test_a_regrade_stays_in_the_jobs_lane_unless_it_names_another() -> None:
    job = Job.new("job-7", "c", REQUEST, "fp", T0, lane="bulk")
    done = _published(
        job.start_attempt("w", T0, LEASE, 3).succeed("w", GradeResult(1, 10, "ok"), T0)
    )
    assert done.regrade(T0, REQUEST).lane == "bulk"
    assert done.regrade(T0, REQUEST, lane="interactive").lane == "interactive"


HELD = ReviewState(ReviewStatus.HELD, (HoldReason.SAMPLED,), Release.IMMEDIATELY, T0, 0)
ACCEPTED = Review(1, "teacher-1", T0, ReviewDecision.ACCEPT, "fine", GradeResult(1, 10, "ok"))


def _succeeded() -> Job:
    return _new().start_attempt("w", T0, LEASE, 3).succeed("w", GradeResult(1, 10, "ok"), T0)


@pytest.mark.parametrize(
    ("job", "step", "status"),
    [
        pytest.param(_new, lambda j: j.hold(HELD), JobStatus.PENDING, id="hold-pending"),
        pytest.param(
            _new, lambda j: j.record_review(ACCEPTED, T0), JobStatus.PENDING, id="review-pending"
        ),
        pytest.param(
            _succeeded,
            lambda j: j.record_review(ACCEPTED, T0),
            JobStatus.SUCCEEDED,
            id="review-never-held",
        ),
    ],
)
def test_a_hold_or_review_out_of_turn_is_refused_naming_the_job_and_its_status(
    job: Callable[[], Job], step: Callable[[Job], Job], status: JobStatus
) -> None:
    with pytest.raises(IllegalTransition) as refused:
        step(job())
    assert refused.value.detail == f"job job-7 cannot go from {status} to {status}"
    assert (refused.value.current, refused.value.target) == (status, status)


def test_a_held_grade_records_the_review_and_stamps_the_job_as_updated() -> None:
    later = T0 + timedelta(seconds=4)
    reviewed = _succeeded().hold(HELD).record_review(ACCEPTED, later)
    assert reviewed.review == dataclasses.replace(
        HELD, status=ReviewStatus.REVIEWED, reviews=(ACCEPTED,), announced=False
    )
    assert reviewed.updated_at == later and reviewed.status is JobStatus.SUCCEEDED


def test_a_cancel_with_a_reason_closes_the_open_attempt_with_it() -> None:
    reason = JobError("lane-purged", "lane bulk purged by alice")
    running = _new().start_attempt("w", T0, LEASE, 3)
    cancelled = running.cancel(T0 + timedelta(seconds=2), reason)
    last = cancelled.history[-1]
    assert (last.ended_at, last.error) == (T0 + timedelta(seconds=2), reason)
    assert cancelled.error == reason


def test_the_completions_announcement_announces_the_grade_posted_with_it() -> None:
    request = dataclasses.replace(REQUEST, max_score=10.0, assignment_id="a-1", rubric_version=1)
    graded = (
        Job.new("job-7", "c", request, "fp", T0)
        .claim("w", T0, LEASE)
        .succeed("w", GradeResult(7, 10, "ok"), T0)
        .post_if_automatic(T0)
    )
    assert graded.posted is not None and not graded.post_announced

    announced = graded.mark_event_published(T0)

    assert announced.event_published and announced.post_announced
