"""What erasing one job takes away: its tally deltas, the events it may have published,
and what a subscriber's record is once erased."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from shared.domain.assignment import TallyChange
from shared.domain.erasure import event_ids_of, is_tombstone, tally_removal
from shared.domain.grade import GradeResult
from shared.domain.ids import completion_event_id, grade_reviewed_event_id
from shared.domain.job import GradingRequest, Job
from shared.domain.review import Release, Review, ReviewDecision, ReviewState, ReviewStatus
from shared.domain.status import JobStatus

T0 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
GRADE = GradeResult(score=15, max_score=20, feedback="good")


def job(status: JobStatus, result: GradeResult | None = None, **request: object) -> Job:
    fields: dict[str, object] = {
        "submission_id": "s1",
        "answer": "42",
        "rubric": "r",
        "max_score": 20.0,
        "assignment_id": "a-1",
        "rubric_version": 1,
        "assignment_round": 2,
    }
    fields.update(request)
    made = Job.new("j1", "c1", GradingRequest(**fields), "fp", T0)  # type: ignore[arg-type]
    return dataclasses.replace(made, status=status, result=result)


def test_a_job_outside_any_assignment_takes_nothing_from_a_tally() -> None:
    assert tally_removal(job(JobStatus.SUCCEEDED, GRADE, assignment_id=None)) is None


def test_a_job_whose_rubric_did_not_come_from_its_assignment_was_never_tallied() -> None:
    assert tally_removal(job(JobStatus.SUCCEEDED, GRADE, rubric_version=None)) is None


def test_a_graded_job_takes_its_status_score_and_histogram_bucket_back() -> None:
    assert tally_removal(job(JobStatus.SUCCEEDED, GRADE)) == TallyChange(
        "a-1", 2, {"SUCCEEDED": -1, "score_sum": -15, "scored": -1, "h7": -1}
    )


def test_a_job_not_graded_takes_back_its_status_alone() -> None:
    assert tally_removal(job(JobStatus.FAILED, GRADE)) == TallyChange("a-1", 2, {"FAILED": -1})
    assert tally_removal(job(JobStatus.SUCCEEDED)) == TallyChange("a-1", 2, {"SUCCEEDED": -1})


def test_every_generations_completion_event_is_named() -> None:
    erased = dataclasses.replace(job(JobStatus.SUCCEEDED, GRADE), generation=2)
    assert event_ids_of(erased) == [completion_event_id("j1", g) for g in (0, 1, 2)]
    assert event_ids_of(job(JobStatus.PENDING)) == [completion_event_id("j1", 0)]


def test_each_review_of_the_reviewed_generation_is_named() -> None:
    reviews = tuple(
        Review(n, "t1", T0, ReviewDecision.ACCEPT, "", GRADE, generation=1) for n in (1, 2)
    )
    state = ReviewState(ReviewStatus.REVIEWED, (), Release.AFTER_REVIEW, T0, 1, reviews)
    # A regrade since: the reviews belong to generation 1, the job is at generation 2.
    erased = dataclasses.replace(job(JobStatus.SUCCEEDED, GRADE), generation=2, review=state)
    assert event_ids_of(erased) == [
        completion_event_id("j1", 0),
        completion_event_id("j1", 1),
        completion_event_id("j1", 2),
        grade_reviewed_event_id("j1", 1, 1),
        grade_reviewed_event_id("j1", 1, 2),
    ]


def test_only_the_bare_erased_mark_is_a_tombstone() -> None:
    assert is_tombstone({"erased": True})
    assert not is_tombstone({"erased": True, "job_id": "j1"})
    assert not is_tombstone({"erased": False})
    assert not is_tombstone({})
