"""The assignment's rules: rubric versions, what each job write adds to the tally, regrades."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from shared.domain.assignment import Assignment, histogram_bucket, tally_change
from shared.domain.errors import IllegalTransition, JobLocked
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest, Job
from shared.domain.status import JobStatus

T0 = datetime(2026, 3, 1, tzinfo=UTC)
LEASE = timedelta(seconds=30)


def assignment() -> Assignment:
    return Assignment.new("a", "c", "t", ("x", "y"), 10.0, "v1", T0)


def job(round_: int = 0) -> Job:
    request = GradingRequest(
        "s", "answer", "x", assignment_id="a", rubric_version=1, assignment_round=round_
    )
    return Job.new("j", "c", request, "fp", T0)


def succeeded(score: float = 8.0) -> Job:
    running = job().claim("w", T0, LEASE)
    return running.succeed("w", GradeResult(score, 10.0, "ok"), T0)


def test_the_same_rubric_again_is_no_new_version() -> None:
    first = assignment()
    assert first.revise(("x", "y"), T0) is first
    second = first.revise("z", T0 + LEASE)
    assert [v.version for v in second.rubrics] == [1, 2]
    assert second.rubric_version(1) == first.rubric and second.rubric_version(3) is None


def test_creating_counts_pending_and_finishing_moves_the_count_and_adds_the_score() -> None:
    created = tally_change(None, job())
    assert created is not None and created.deltas == {"PENDING": 1}
    running = job().claim("w", T0, LEASE)
    assert tally_change(job(), running).deltas == {"PENDING": -1, "RUNNING": 1}  # type: ignore[union-attr]
    done = succeeded(8.0)
    change = tally_change(running, done)
    assert change is not None
    assert change.deltas == {"RUNNING": -1, "SUCCEEDED": 1, "score_sum": 8.0, "scored": 1, "h8": 1}
    assert tally_change(done, done.mark_event_published(T0)) is None


def test_a_job_without_an_assignment_rubric_is_not_counted() -> None:
    request = GradingRequest("s", "a", "x", assignment_id="hw-1")  # its own rubric
    label_only = dataclasses.replace(job(), request=request)
    assert tally_change(None, label_only) is None


def test_a_regraded_job_counts_in_its_new_round_only() -> None:
    done = succeeded().mark_event_published(T0)
    moved = done.regrade(T0, dataclasses.replace(done.request, assignment_round=1))
    change = tally_change(done, moved)
    assert change is not None and (change.round, change.deltas) == (1, {"PENDING": 1})


def test_histogram_buckets_are_tenths_of_the_scale() -> None:
    assert [histogram_bucket(s, 10) for s in (0, 0.99, 5, 9.99, 10, 12)] == [0, 0, 5, 9, 10, 10]
    assert histogram_bucket(3, 0) == 0


def test_a_regrade_keeps_the_old_result_and_starts_a_fresh_budget() -> None:
    done = succeeded(8.0)
    with pytest.raises(JobLocked):  # its event is not out yet
        done.regrade(T0, done.request)
    published = done.mark_event_published(T0)
    request = dataclasses.replace(done.request, rubric_version=2, assignment_round=1)
    regraded = published.regrade(T0 + LEASE, request)
    assert regraded.status is JobStatus.PENDING and regraded.attempts == 0
    assert regraded.generation == done.generation + 1 and regraded.result is None
    assert regraded.regraded_from is not None
    assert regraded.regraded_from.result == done.result
    assert regraded.regraded_from.rubric_version == 1
    assert regraded.replayed_generation == regraded.generation  # a new event id
    round_trip = Job.from_record(regraded.to_record())
    assert round_trip == regraded


def test_only_a_final_graded_job_can_be_regraded() -> None:
    with pytest.raises(IllegalTransition):
        job().regrade(T0, job().request)
    cancelled = job().cancel(T0).mark_event_published(T0)
    with pytest.raises(IllegalTransition):
        cancelled.regrade(T0, cancelled.request)


def test_a_regrade_starts_its_generation_without_the_deferrals_of_the_one_before() -> None:
    # Deferrals name a generation's successor tasks; a new generation counts from zero,
    # as an operator's replay does.
    deferred = job().claim("w", T0, LEASE).defer("w", T0).claim("w", T0, LEASE)
    assert deferred.deferrals == 1
    done = deferred.succeed("w", GradeResult(8.0, 10.0, "ok"), T0).mark_event_published(T0)
    regraded = done.regrade(T0, dataclasses.replace(done.request, assignment_round=1))
    assert regraded.deferrals == 0
    assert regraded.task_name != done.task_name
