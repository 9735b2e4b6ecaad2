"""What `settled` decides for a grade just stored, pinned: the regrade threshold it uses
for a teacher's grade, the hold rules it applies to the job itself, and how a student's
open regrade request keeps the regraded grade in the teacher's queue."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest, Job
from shared.domain.review import (
    HoldReason,
    RegradeRequest,
    Release,
    Review,
    ReviewDecision,
    ReviewPolicy,
    ReviewState,
    ReviewStatus,
    requested_state,
)
from shared.service_layer.worker import settled

T0 = datetime(2026, 1, 1, tzinfo=UTC)
LEASE = timedelta(seconds=30)
REQUEST = GradingRequest("s", "a", "light", 8, assignment_id="a-1", rubric_version=1)


def _graded(job_id: str, score: float = 4, at: datetime = T0) -> Job:
    """A job of an assignment graded once, without review rules, and announced."""
    first = Job.new(job_id, "c", REQUEST, "fp", at).claim("w", at, LEASE)
    done = settled(first, first.succeed("w", GradeResult(score, 8, "m"), at), None, at)
    return done.mark_event_published(at)


def _teacher_graded(job_id: str, teacher_score: float) -> Job:
    graded = _graded(job_id)
    teacher = Review(
        1, "key:t", T0, ReviewDecision.OVERRIDE, "r", GradeResult(teacher_score, 8, "t"), 0
    )
    state = ReviewState(ReviewStatus.REVIEWED, (), Release.IMMEDIATELY, T0, 0, (teacher,))
    return graded.hold(state).post(T0, "key:t")


def test_a_regrade_of_a_teachers_grade_is_flagged_by_the_policys_own_threshold() -> None:
    """The policy's regrade threshold (3 points), not the default tenth of the max score
    (0.8 of 8), decides whether the new model grade moved away from the teacher's."""
    at = T0 + timedelta(hours=1)
    again = _teacher_graded("job-1", teacher_score=6).regrade(at, REQUEST).claim("w", at, LEASE)
    done = again.succeed("w", GradeResult(4, 8, "m2"), at)

    within = settled(again, done, ReviewPolicy(regrade_threshold=3.0), at)
    assert within.review is not None
    assert within.review.status is ReviewStatus.REVIEWED
    assert within.review.reasons == ()
    assert within.review.generation == 1

    past = settled(again, done, ReviewPolicy(regrade_threshold=1.5), at)
    assert past.review is not None
    assert past.review.status is ReviewStatus.HELD
    assert past.review.reasons == (HoldReason.REGRADE_MOVED,)


def test_the_calibration_sample_is_drawn_by_the_jobs_own_id() -> None:
    """Half of the grades are sampled, by a hash of the job id: job-3 is in the sample,
    job-1 is not, whatever else they share."""
    policy = ReviewPolicy(sample_rate=0.5, release=Release.AFTER_REVIEW)
    for job_id, held in (("job-3", True), ("job-1", False)):
        running = Job.new(job_id, "c", REQUEST, "fp", T0).claim("w", T0, LEASE)
        done = settled(running, running.succeed("w", GradeResult(4, 8, "m"), T0), policy, T0)
        if held:
            assert done.review is not None
            assert done.review.status is ReviewStatus.HELD
            assert done.review.reasons == (HoldReason.SAMPLED,)
            assert done.review.generation == 0
            assert done.posted is None  # withheld until the teacher reviews it
        else:
            assert done.review is None
            assert done.posted is not None


def _asked_and_regraded(at: datetime) -> Job:
    """A graded job whose student asked for a second look, then regraded and claimed."""
    graded = _graded("job-1")
    asked = dataclasses.replace(
        graded,
        regrade_request=RegradeRequest("student-1", T0, "why", 0),
        review=requested_state(graded.review, 0, T0),
        updated_at=T0,
    )
    return asked.regrade(at, REQUEST).claim("w", at, LEASE)


def test_an_open_request_keeps_its_place_beside_the_regrades_own_hold_reasons() -> None:
    at = T0 + timedelta(hours=2)
    again = _asked_and_regraded(at)
    low = GradeResult(4, 8, "m2", confidence=0.2)
    policy = ReviewPolicy(confidence_below=0.5)

    done = settled(again, again.succeed("w", low, at), policy, at)

    assert done.review is not None
    assert done.review.status is ReviewStatus.HELD
    assert done.review.reasons == (HoldReason.LOW_CONFIDENCE, HoldReason.REGRADE_REQUEST)
    assert done.review.held_at == T0  # its place in the queue: when the student asked
    assert done.review.release is Release.IMMEDIATELY
    assert done.review.generation == 1


def test_an_open_request_holds_the_regraded_grade_of_the_new_generation() -> None:
    at = T0 + timedelta(hours=2)
    again = _asked_and_regraded(at)

    done = settled(again, again.succeed("w", GradeResult(5, 8, "m2"), at), None, at)

    assert done.review is not None
    assert done.review.status is ReviewStatus.HELD
    assert done.review.reasons == (HoldReason.REGRADE_REQUEST,)
    assert done.review.held_at == T0
    assert done.review.generation == 1


def test_a_grade_no_rule_holds_is_returned_as_graded_review_and_all() -> None:
    """Without a hold state, `settled` hands back the graded job itself: whatever review it
    carries is not its to drop."""
    current = Job.new("job-9", "c", REQUEST, "fp", T0).claim("w", T0, LEASE)
    carried = ReviewState(ReviewStatus.REVIEWED, (), Release.IMMEDIATELY, T0, 0, ())
    done = dataclasses.replace(current.succeed("w", GradeResult(5, 8, "m"), T0), review=carried)
    assert settled(current, done, None, T0).review == carried
