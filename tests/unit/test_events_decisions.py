"""How an event is read back from its payload, pinned value by value."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from shared.domain.assignment import Tally
from shared.domain.events import AssignmentGraded, GradePosted, GradeReviewed
from shared.domain.grade import GradeResult
from shared.domain.ids import assignment_graded_event_id, grade_reviewed_event_id
from shared.domain.job import GradingRequest, Job
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


def _data(mean: object) -> dict[str, object]:
    return {
        "assignment_id": "a1",
        "client_id": "c",
        "round": "2",
        "submissions": 3,
        "succeeded": 1,
        "failed": 1,
        "cancelled": 1,
        "mean_score": mean,
    }


def test_a_round_with_no_grade_reads_back_without_a_mean() -> None:
    event = AssignmentGraded.from_data("e1", T0, _data(None))
    assert event.mean_score is None
    assert event.data() == {**_data(None), "round": 2}
    assert (event.event_id, event.occurred_at) == ("e1", T0)


def test_a_rounds_mean_reads_back_as_a_float() -> None:
    event = AssignmentGraded.from_data("e1", T0, _data(7))
    assert event.mean_score == 7.0 and isinstance(event.mean_score, float)


def test_a_rounds_event_counts_its_submissions_by_outcome() -> None:
    counts = {JobStatus.SUCCEEDED: 4, JobStatus.FAILED: 2, JobStatus.CANCELLED: 1}
    tally = Tally(counts=counts, score_sum=30.0, scored=4)
    event = AssignmentGraded.of("a1", "c", 2, tally, T0)
    assert event == AssignmentGraded(
        event_id=assignment_graded_event_id("a1", 2, 7),
        assignment_id="a1",
        client_id="c",
        round=2,
        submissions=7,
        succeeded=4,
        failed=2,
        cancelled=1,
        mean_score=7.5,
        occurred_at=T0,
    )
    assert event.data() == {
        "assignment_id": "a1",
        "client_id": "c",
        "round": 2,
        "submissions": 7,
        "succeeded": 4,
        "failed": 2,
        "cancelled": 1,
        "mean_score": 7.5,
    }


def test_a_round_missing_an_outcome_counts_none_of_it() -> None:
    event = AssignmentGraded.of("a1", "c", 0, Tally(counts={JobStatus.FAILED: 3}), T0)
    assert (event.submissions, event.succeeded, event.failed, event.cancelled) == (3, 0, 3, 0)
    assert event.mean_score is None


def test_a_round_with_no_failure_counts_no_failed_submission() -> None:
    event = AssignmentGraded.of("a1", "c", 0, Tally(counts={JobStatus.SUCCEEDED: 2}), T0)
    assert (event.submissions, event.succeeded, event.failed, event.cancelled) == (2, 2, 0, 0)


# --- a reviewer's decision, as announced ---------------------------------------------------

T1 = T0 + timedelta(minutes=5)
MODELS = GradeResult(15, 20, "good", model="m1", prompt_version="grading-v1")
TEACHERS = Review(
    1, "teacher-1", T1, ReviewDecision.OVERRIDE, "too harsh", GradeResult(17, 20, "ok")
)
HELD = ReviewState(ReviewStatus.HELD, (HoldReason.SAMPLED,), Release.IMMEDIATELY, T0, 2)


def _graded(result: GradeResult = MODELS) -> Job:
    request = GradingRequest("sub-9", "a", "r", max_score=20, assignment_id="bio-101")
    job = Job.new("job-9", "client-a", request, "fp", T0, author="user-5")
    claimed = job.claim("w", T0, timedelta(seconds=60))
    return dataclasses.replace(claimed.succeed("w", result, T0), generation=2)


def test_a_review_is_announced_with_the_request_the_model_and_the_author() -> None:
    event = GradeReviewed.from_job(_graded().hold(HELD).record_review(TEACHERS, T1))
    assert event == GradeReviewed(
        event_id=grade_reviewed_event_id("job-9", 2, 1),
        job_id="job-9",
        client_id="client-a",
        submission_id="sub-9",
        assignment_id="bio-101",
        review=1,
        decision="override",
        reviewer="teacher-1",
        model_score=15,
        score=17,
        max_score=20,
        model="m1",
        prompt_version="grading-v1",
        occurred_at=T1,
        author="user-5",
    )
    assert event.data() == {
        "job_id": "job-9",
        "client_id": "client-a",
        "submission_id": "sub-9",
        "assignment_id": "bio-101",
        "review": 1,
        "decision": "override",
        "reviewer": "teacher-1",
        "model_score": 15,
        "score": 17,
        "max_score": 20,
        "model": "m1",
        "prompt_version": "grading-v1",
        "author": "user-5",
    }


def test_a_review_of_an_offline_grade_is_announced_without_model_or_prompt() -> None:
    offline = _graded(GradeResult(15, 20, "good")).hold(HELD).record_review(TEACHERS, T1)
    event = GradeReviewed.from_job(offline)
    assert (event.model, event.prompt_version) == (None, None)


def test_a_job_never_held_has_no_review_to_announce() -> None:
    with pytest.raises(ValueError, match=r"^job job-9 has no review$"):
        GradeReviewed.from_job(_graded())


def test_a_held_grade_not_yet_reviewed_has_no_review_to_announce() -> None:
    with pytest.raises(ValueError, match=r"^job job-9 has no review$"):
        GradeReviewed.from_job(_graded().hold(HELD))


def test_a_review_without_the_models_result_cannot_be_announced() -> None:
    reviewed = _graded().hold(HELD).record_review(TEACHERS, T1)
    with pytest.raises(ValueError, match=r"^job job-9 has no review$"):
        GradeReviewed.from_job(dataclasses.replace(reviewed, result=None))


def test_a_job_of_an_assignment_never_posted_has_no_posted_grade_to_announce() -> None:
    job = _graded()
    assert job.request.assignment_id is not None and job.posted is None
    with pytest.raises(ValueError, match=r"^job job-9 has no posted grade$"):
        GradePosted.from_job(job)
