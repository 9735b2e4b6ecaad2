"""The review domain's decisions: which rule holds a grade and in what order, the
calibration sample, the regrade threshold, the records as stored (every key, every
default), and the review state a student's request, a kept request and a regrade leave."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone

import pytest

from shared.domain.grade import GradeResult
from shared.domain.review import (
    HoldReason,
    RegradeRequest,
    Release,
    RequestAnswer,
    Review,
    ReviewDecision,
    ReviewPolicy,
    ReviewState,
    ReviewStatus,
    after_regrade,
    hold_state,
    policy_of,
    regrade_threshold,
    request_kept,
    requested_state,
    sampled,
)

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
#: A moment in another zone, on the whole second: stored as UTC with microseconds.
PARIS = timezone(timedelta(hours=1))
T_PARIS = datetime(2026, 3, 1, 10, 30, tzinfo=PARIS)


def grade(score: float, confidence: float | None = None, format_retries: int = 0) -> GradeResult:
    return GradeResult(
        score, 10, "ok", confidence=confidence, format_retries=format_retries, grader="g"
    )


def a_review(number: int = 1, score: float = 6.0, generation: int | None = 2) -> Review:
    return Review(
        number,
        "key:ms",
        T0 + timedelta(minutes=number),
        ReviewDecision.OVERRIDE,
        "partial credit",
        grade(score),
        generation,
    )


def held(
    reasons: tuple[HoldReason, ...] = (HoldReason.SAMPLED,),
    release: Release = Release.AFTER_REVIEW,
    reviews: tuple[Review, ...] = (),
    **changes: object,
) -> ReviewState:
    state = ReviewState(ReviewStatus.HELD, reasons, release, T0, 1, reviews)
    return dataclasses.replace(state, **changes)  # type: ignore[arg-type]


# --- the calibration sample --------------------------------------------------------------

# The sample's hash of "gradeq/review-sample\0<job id>", its first 8 bytes big-endian over
# 2**64: job-0 0.01436, job-1 0.68090, job-3 0.14758, job-4 0.06841, job-8 0.01393.


def test_the_sample_takes_a_job_whose_hash_lies_below_the_rate() -> None:
    assert sampled("job-0", 0.0144) and not sampled("job-0", 0.0143)
    assert sampled("job-1", 0.681) and not sampled("job-1", 0.6809)
    assert sampled("job-8", 0.01393) and not sampled("job-8", 0.01392)
    # A rate equal to the job's hash does not take it: the sample is strictly below.
    assert not sampled("job-0", 0.014360949787870995)
    taken = [f"job-{i}" for i in range(12) if sampled(f"job-{i}", 0.1)]
    assert taken == ["job-0", "job-4", "job-8"]


def test_a_rate_of_none_or_all_decides_without_the_hash() -> None:
    assert not sampled("job-8", 0.0) and not sampled("job-8", -0.5)
    assert sampled("job-11", 1.0) and sampled("job-11", 1.5)


# --- the hold rules ----------------------------------------------------------------------


def test_a_policy_holds_nothing_by_default() -> None:
    policy = ReviewPolicy()
    assert policy == ReviewPolicy(None, None, 0.0, False, 0.0, Release.IMMEDIATELY, None)
    assert policy.reasons("job-0", grade(5, confidence=0.0, format_retries=3)) == ()


def test_low_confidence_is_strictly_below_the_bound() -> None:
    policy = ReviewPolicy(confidence_below=0.5)
    assert policy.reasons("job-1", grade(9, confidence=0.49)) == (HoldReason.LOW_CONFIDENCE,)
    assert policy.reasons("job-1", grade(9, confidence=0.5)) == ()
    assert policy.reasons("job-1", grade(9, confidence=None)) == ()


def test_the_pass_mark_holds_a_score_within_the_margin_either_side() -> None:
    policy = ReviewPolicy(pass_mark=5, margin=1)
    for score in (4, 5, 6):
        assert policy.reasons("job-1", grade(score)) == (HoldReason.NEAR_PASS_MARK,), score
    assert policy.reasons("job-1", grade(3.99)) == ()
    assert policy.reasons("job-1", grade(6.01)) == ()
    # Without a margin only the pass mark itself.
    exact = ReviewPolicy(pass_mark=0)
    assert exact.reasons("job-1", grade(0)) == (HoldReason.NEAR_PASS_MARK,)
    assert exact.reasons("job-1", grade(0.01)) == ()


def test_format_failures_hold_only_when_the_rule_is_on_and_the_model_retried() -> None:
    on = ReviewPolicy(format_failures=True)
    assert on.reasons("job-1", grade(9, format_retries=1)) == (HoldReason.FORMAT_FAILURE,)
    assert on.reasons("job-1", grade(9, format_retries=0)) == ()
    off = ReviewPolicy(format_failures=False)
    assert off.reasons("job-1", grade(9, format_retries=2)) == ()


def test_the_sample_rule_uses_the_job_id_and_the_rate() -> None:
    policy = ReviewPolicy(sample_rate=0.1)
    assert policy.reasons("job-0", grade(9)) == (HoldReason.SAMPLED,)
    assert policy.reasons("job-1", grade(9)) == ()


def test_every_rule_met_is_a_reason_in_a_fixed_order() -> None:
    policy = ReviewPolicy(
        confidence_below=0.9, pass_mark=5, margin=0, format_failures=True, sample_rate=0.1
    )
    reasons = policy.reasons("job-0", grade(5, confidence=0.1, format_retries=1))
    assert reasons == (
        HoldReason.LOW_CONFIDENCE,
        HoldReason.NEAR_PASS_MARK,
        HoldReason.FORMAT_FAILURE,
        HoldReason.SAMPLED,
    )


# --- the policy as stored ----------------------------------------------------------------


def test_a_policy_is_stored_with_every_key() -> None:
    policy = ReviewPolicy(0.4, 5.0, 0.5, True, 0.25, Release.AFTER_REVIEW, 1.5)
    assert policy.to_dict() == {
        "confidence_below": 0.4,
        "pass_mark": 5.0,
        "margin": 0.5,
        "format_failures": True,
        "sample_rate": 0.25,
        "release": "after_review",
        "regrade_threshold": 1.5,
    }
    assert ReviewPolicy.from_dict(policy.to_dict()) == policy


def test_a_stored_policy_reads_its_numbers_as_floats() -> None:
    policy = ReviewPolicy.from_dict(
        {
            "confidence_below": "0.4",
            "pass_mark": "5",
            "margin": "0.5",
            "format_failures": 1,
            "sample_rate": "0.25",
            "release": "after_review",
            "regrade_threshold": "1.5",
        }
    )
    assert policy == ReviewPolicy(0.4, 5.0, 0.5, True, 0.25, Release.AFTER_REVIEW, 1.5)


def test_a_policy_stored_without_keys_or_with_nulls_takes_the_defaults() -> None:
    assert ReviewPolicy.from_dict({}) == ReviewPolicy()
    nulls = {key: None for key in ReviewPolicy().to_dict()}
    assert ReviewPolicy.from_dict(nulls) == ReviewPolicy()
    # Zero is a value of its own, not a missing one.
    zeros = ReviewPolicy.from_dict({"confidence_below": 0, "pass_mark": 0, "regrade_threshold": 0})
    assert (zeros.confidence_below, zeros.pass_mark, zeros.regrade_threshold) == (0.0, 0.0, 0.0)


def test_the_policy_is_read_from_the_review_key_of_the_settings() -> None:
    settings = {"review": {"pass_mark": 5, "release": "after_review"}, "posting": "manual"}
    assert policy_of(settings) == ReviewPolicy(pass_mark=5.0, release=Release.AFTER_REVIEW)
    assert policy_of({"review": {}}) == ReviewPolicy()
    assert policy_of({}) is None
    assert policy_of({"review": None}) is None
    assert policy_of({"review": "pass_mark=5"}) is None


def test_the_regrade_threshold_is_the_policys_else_a_tenth_of_the_max_score() -> None:
    assert regrade_threshold(None, 20) == pytest.approx(2.0)
    assert regrade_threshold(ReviewPolicy(), 20) == pytest.approx(2.0)
    assert regrade_threshold(ReviewPolicy(regrade_threshold=0.5), 20) == 0.5
    assert regrade_threshold(ReviewPolicy(regrade_threshold=0.0), 20) == 0.0
    assert ReviewPolicy().threshold(30) == pytest.approx(3.0)
    assert ReviewPolicy(regrade_threshold=4.0).threshold(30) == 4.0


# --- the state a new grade starts with ---------------------------------------------------


def test_a_grade_no_rule_holds_has_no_review_state() -> None:
    assert hold_state(None, "job-0", 1, grade(5), T0) is None
    assert hold_state(ReviewPolicy(pass_mark=9), "job-0", 1, grade(5), T0) is None


def test_a_held_grade_starts_held_with_its_reasons_release_time_and_generation() -> None:
    policy = ReviewPolicy(pass_mark=5, sample_rate=0.1, release=Release.AFTER_REVIEW)
    state = hold_state(policy, "job-0", 3, grade(5), T0)
    assert state == ReviewState(
        status=ReviewStatus.HELD,
        reasons=(HoldReason.NEAR_PASS_MARK, HoldReason.SAMPLED),
        release=Release.AFTER_REVIEW,
        held_at=T0,
        generation=3,
        reviews=(),
        announced=True,
        reopen=False,
    )
    immediately = hold_state(ReviewPolicy(pass_mark=5), "job-1", 0, grade(5), T0)
    assert immediately is not None and immediately.release is Release.IMMEDIATELY


# --- a review as stored ------------------------------------------------------------------


def test_a_review_is_stored_with_every_key() -> None:
    review = a_review(number=2, generation=0)
    assert review.to_dict() == {
        "number": 2,
        "by": "key:ms",
        "at": (T0 + timedelta(minutes=2)).isoformat(),
        "decision": "override",
        "reason": "partial credit",
        "result": grade(6.0).to_dict(),
        "generation": 0,
    }
    assert Review.from_dict(review.to_dict()) == review


def test_a_review_stored_before_generations_has_none() -> None:
    review = a_review(generation=None)
    assert "generation" not in review.to_dict()
    assert Review.from_dict(review.to_dict()) == review


def test_a_stored_review_reads_its_number_generation_and_missing_reason() -> None:
    data = {
        "number": "3",
        "by": "user:t1",
        "at": "2026-03-01T09:00:00+00:00",
        "decision": "accept",
        "result": grade(4).to_dict(),
        "generation": "5",
    }
    review = Review.from_dict(data)
    assert review == Review(3, "user:t1", T0, ReviewDecision.ACCEPT, "", grade(4), 5)
    assert Review.from_dict({**data, "reason": None}).reason == ""
    assert Review.from_dict({**data, "generation": None}).generation is None


# --- a review state as stored ------------------------------------------------------------


def test_a_review_state_is_stored_with_utc_microsecond_hold_time() -> None:
    state = ReviewState(
        ReviewStatus.REVIEWED,
        (HoldReason.LOW_CONFIDENCE, HoldReason.SAMPLED),
        Release.AFTER_REVIEW,
        T_PARIS,
        4,
        (a_review(1), a_review(2)),
        announced=False,
    )
    assert state.to_dict() == {
        "status": "reviewed",
        "reasons": ["low-confidence", "sampled"],
        "release": "after_review",
        "held_at": "2026-03-01T09:30:00.000000+00:00",
        "generation": 4,
        "reviews": [a_review(1).to_dict(), a_review(2).to_dict()],
        "announced": False,
    }
    back = ReviewState.from_dict(state.to_dict())
    assert back == dataclasses.replace(state, held_at=T_PARIS.astimezone(UTC))


@pytest.fixture
def machine_in_new_york(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process's local time zone is New York's for the test."""
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.usefixtures("machine_in_new_york")
def test_the_hold_time_is_stored_in_utc_whatever_the_machines_zone() -> None:
    assert held(held_at=T_PARIS).to_dict()["held_at"] == "2026-03-01T09:30:00.000000+00:00"


def test_a_state_that_reopens_says_so_and_only_then() -> None:
    reopening = held(reopen=True)
    assert reopening.to_dict()["reopen"] is True
    assert ReviewState.from_dict(reopening.to_dict()).reopen is True
    assert "reopen" not in held().to_dict()


def test_a_state_stored_with_few_keys_takes_the_defaults() -> None:
    state = ReviewState.from_dict(
        {"status": "held", "release": "immediately", "held_at": "2026-03-01T09:00:00+00:00"}
    )
    assert state == ReviewState(ReviewStatus.HELD, (), Release.IMMEDIATELY, T0, 0)
    assert (state.reviews, state.announced, state.reopen) == ((), True, False)
    nulls = ReviewState.from_dict(
        {
            "status": "held",
            "release": "immediately",
            "held_at": "2026-03-01T09:00:00+00:00",
            "reasons": None,
            "reviews": None,
            "generation": "2",
            "announced": 0,
            "reopen": 1,
        }
    )
    assert (nulls.reasons, nulls.reviews, nulls.generation) == ((), (), 2)
    assert (nulls.announced, nulls.reopen) == (False, True)


# --- a review state's steps ----------------------------------------------------------------


def test_a_review_records_the_decision_and_waits_for_its_announcement() -> None:
    first = held().reviewed(a_review(1))
    assert first.status is ReviewStatus.REVIEWED
    assert first.reviews == (a_review(1),) and first.latest == a_review(1)
    assert first.announced is False
    assert (first.reasons, first.release, first.held_at, first.generation) == (
        (HoldReason.SAMPLED,),
        Release.AFTER_REVIEW,
        T0,
        1,
    )
    second = first.mark_announced().reviewed(a_review(2))
    assert second.reviews == (a_review(1), a_review(2)) and second.latest == a_review(2)
    assert second.mark_announced() == dataclasses.replace(second, announced=True)
    assert held().latest is None


def test_a_regrade_carries_the_reviews_announced_with_the_choice_to_reopen() -> None:
    state = held(reviews=(a_review(1),), announced=False)
    assert state.carried(True) == dataclasses.replace(state, announced=True, reopen=True)
    assert state.carried(False) == dataclasses.replace(state, announced=True, reopen=False)
    assert held(reopen=True).carried(False).reopen is False


def test_only_an_undecided_grade_released_after_review_is_withheld() -> None:
    assert held(release=Release.AFTER_REVIEW).withheld
    assert not held(release=Release.IMMEDIATELY).withheld
    assert not held(reviews=(a_review(),)).withheld
    assert not held(status=ReviewStatus.REVIEWED).withheld
    assert held(reviews=(a_review(),)).flagged
    assert not held().flagged
    assert not held(status=ReviewStatus.REVIEWED, reviews=(a_review(),)).flagged


# --- a student's regrade request -----------------------------------------------------------


def test_a_request_is_open_until_answered() -> None:
    request = RegradeRequest("ada", T0, "look again", 2)
    assert request.is_open
    answered = request.answered(RequestAnswer.CHANGE, "user:t1", T_PARIS, "fair point")
    assert answered == RegradeRequest(
        "ada", T0, "look again", 2, RequestAnswer.CHANGE, "user:t1", T_PARIS, "fair point"
    )
    assert not answered.is_open


def test_a_request_is_stored_with_every_key_open_or_answered() -> None:
    request = RegradeRequest("ada", T0, "look again", 2)
    assert request.to_dict() == {
        "by": "ada",
        "at": T0.isoformat(),
        "reason": "look again",
        "generation": 2,
        "answer": None,
        "answered_by": None,
        "answered_at": None,
        "answer_reason": "",
    }
    assert RegradeRequest.from_dict(request.to_dict()) == request
    answered = request.answered(RequestAnswer.KEEP, "user:t1", T_PARIS, "it stands")
    assert answered.to_dict() == {
        "by": "ada",
        "at": T0.isoformat(),
        "reason": "look again",
        "generation": 2,
        "answer": "keep",
        "answered_by": "user:t1",
        "answered_at": T_PARIS.isoformat(),
        "answer_reason": "it stands",
    }
    assert RegradeRequest.from_dict(answered.to_dict()) == answered


def test_a_request_stored_with_few_keys_takes_the_defaults() -> None:
    request = RegradeRequest.from_dict({"by": "ada", "at": "2026-03-01T09:00:00+00:00"})
    assert request == RegradeRequest("ada", T0, "", 0)
    nulls = RegradeRequest.from_dict(
        {
            "by": "ada",
            "at": "2026-03-01T09:00:00+00:00",
            "reason": None,
            "generation": "3",
            "answer": "",
            "answered_by": None,
            "answered_at": "",
            "answer_reason": None,
        }
    )
    assert nulls == RegradeRequest("ada", T0, "", 3)
    answered = RegradeRequest.from_dict(
        {
            "by": "ada",
            "at": "2026-03-01T09:00:00+00:00",
            "answer": "change",
            "answered_by": "user:t1",
            "answered_at": "2026-03-01T10:30:00+01:00",
        }
    )
    assert (answered.answer, answered.answered_by, answered.answered_at) == (
        RequestAnswer.CHANGE,
        "user:t1",
        T_PARIS,
    )
    assert answered.answer_reason == ""


def test_a_request_on_a_grade_never_held_holds_it_released() -> None:
    state = requested_state(None, 4, T_PARIS)
    assert state == ReviewState(
        ReviewStatus.HELD, (HoldReason.REGRADE_REQUEST,), Release.IMMEDIATELY, T_PARIS, 4
    )


def test_a_request_on_a_reviewed_grade_holds_it_again_keeping_its_reviews() -> None:
    reviewed = held(
        reasons=(HoldReason.SAMPLED,), release=Release.AFTER_REVIEW, reviews=(a_review(),)
    )
    reviewed = dataclasses.replace(reviewed, status=ReviewStatus.REVIEWED)
    state = requested_state(reviewed, 7, T_PARIS)
    assert state == dataclasses.replace(
        reviewed,
        status=ReviewStatus.HELD,
        reasons=(HoldReason.SAMPLED, HoldReason.REGRADE_REQUEST),
        release=Release.IMMEDIATELY,
        held_at=T_PARIS,
    )
    assert state.generation == 1  # the state's own, not the one asked about


def test_a_request_is_a_reason_once() -> None:
    asked = held(reasons=(HoldReason.REGRADE_REQUEST, HoldReason.SAMPLED))
    state = requested_state(asked, 1, T_PARIS)
    assert state.reasons == (HoldReason.REGRADE_REQUEST, HoldReason.SAMPLED)


# --- a regrade while a request is open -----------------------------------------------------


def requested() -> ReviewState:
    """The state an open request holds a grade in: released, its place in the queue."""
    return ReviewState(
        ReviewStatus.HELD,
        (HoldReason.SAMPLED, HoldReason.REGRADE_REQUEST),
        Release.IMMEDIATELY,
        T0,
        1,
        (a_review(1),),
    )


def test_a_regrade_without_a_state_of_its_own_keeps_the_requests() -> None:
    kept = request_kept(None, requested(), 2)
    assert kept == dataclasses.replace(requested(), generation=2)


def test_a_regrades_own_reasons_stand_beside_the_request_in_its_place() -> None:
    own = ReviewState(
        ReviewStatus.HELD,
        (HoldReason.REGRADE_MOVED,),
        Release.AFTER_REVIEW,
        T_PARIS,
        2,
        (a_review(1), a_review(2)),
        announced=False,
        reopen=True,
    )
    kept = request_kept(own, requested(), 3)
    assert kept == ReviewState(
        ReviewStatus.HELD,
        (HoldReason.REGRADE_MOVED, HoldReason.REGRADE_REQUEST),
        Release.IMMEDIATELY,  # the request's release
        T0,  # the request's place in the queue
        3,
        (a_review(1), a_review(2)),  # the regrade's own
        announced=False,
        reopen=True,
    )


def test_a_regrade_that_left_the_grade_reviewed_is_held_for_the_request_alone() -> None:
    own = ReviewState(
        ReviewStatus.REVIEWED,
        (HoldReason.SAMPLED,),
        Release.AFTER_REVIEW,
        T_PARIS,
        2,
        (a_review(1),),
    )
    kept = request_kept(own, requested(), 3)
    assert kept.status is ReviewStatus.HELD
    assert kept.reasons == (HoldReason.REGRADE_REQUEST,)
    assert (kept.release, kept.held_at, kept.generation) == (Release.IMMEDIATELY, T0, 3)


def test_a_kept_request_is_a_reason_once() -> None:
    own = held(reasons=(HoldReason.REGRADE_REQUEST, HoldReason.REOPENED))
    kept = request_kept(own, requested(), 3)
    assert kept.reasons == (HoldReason.REGRADE_REQUEST, HoldReason.REOPENED)


# --- a reviewed grade after a regrade ------------------------------------------------------


def reviewed_state(teacher: float, reopen: bool = False) -> ReviewState:
    state = ReviewState(
        ReviewStatus.REVIEWED,
        (HoldReason.SAMPLED,),
        Release.AFTER_REVIEW,
        T0,
        1,
        (a_review(1, score=teacher),),
        reopen=reopen,
    )
    return state


def test_a_regrade_within_the_threshold_stays_reviewed_under_the_new_generation() -> None:
    state = reviewed_state(6.0)
    for score in (5.0, 6.0, 7.0):
        after = after_regrade(state, grade(score), 1.0, 2, T_PARIS)
        assert after == dataclasses.replace(state, generation=2), score


def test_a_regrade_beyond_the_threshold_either_way_goes_back_to_the_teacher() -> None:
    state = reviewed_state(6.0)
    for score in (4.99, 7.01):
        after = after_regrade(state, grade(score), 1.0, 2, T_PARIS)
        assert after == dataclasses.replace(
            state,
            status=ReviewStatus.HELD,
            reasons=(HoldReason.REGRADE_MOVED,),
            held_at=T_PARIS,
            generation=2,
        ), score
        assert after.flagged and not after.withheld


def test_a_regrade_that_asked_to_reopen_puts_the_grade_back_once() -> None:
    state = reviewed_state(6.0, reopen=True)
    after = after_regrade(state, grade(6.0), 1.0, 2, T_PARIS)
    assert after == dataclasses.replace(
        state,
        status=ReviewStatus.HELD,
        reasons=(HoldReason.REOPENED,),
        held_at=T_PARIS,
        generation=2,
        reopen=False,
    )
    moved = after_regrade(state, grade(0.0), 1.0, 2, T_PARIS)
    assert moved.reasons == (HoldReason.REOPENED, HoldReason.REGRADE_MOVED)
    assert moved.reopen is False


def test_only_a_reviewed_grade_is_carried_through_a_regrade() -> None:
    with pytest.raises(AssertionError) as raised:
        after_regrade(held(), grade(5), 1.0, 2, T0)
    assert str(raised.value) == "only a reviewed grade is carried through a regrade"
