"""The grade sheet's criterion cells: a final grade's verdict per criterion, nothing for a
job without one, an empty cell where a verdict names no score, and padding to the rubric."""

from __future__ import annotations

import dataclasses
import math
from datetime import UTC, datetime, timedelta

import pytest

from shared.domain.grade import GradeResult
from shared.domain.grade_sheet import ClassStatistics, criteria_cells, grade_row
from shared.domain.job import Job
from shared.domain.review import (
    HoldReason,
    Release,
    Review,
    ReviewDecision,
    ReviewState,
    ReviewStatus,
)
from shared.domain.status import JobStatus
from tests.unit.test_erasure_domain_decisions import T0, job

VERDICTS = (
    {"criterion": "names light", "score": 2.0},
    {"criterion": "names water", "verdict": "partly"},
    {"criterion": "names chlorophyll", "met": False},
    {"criterion": "spelling"},
)
GRADED = GradeResult(score=7, max_score=20, feedback="ok", criteria=VERDICTS)


def test_a_final_grade_gives_each_criterion_its_score_verdict_or_met_then_empty_cells() -> None:
    cells = criteria_cells(job(JobStatus.SUCCEEDED, GRADED), 6)
    assert cells == [2.0, "partly", False, "", "", ""]


def test_the_cells_stop_at_the_rubric_s_count() -> None:
    assert criteria_cells(job(JobStatus.SUCCEEDED, GRADED), 2) == [2.0, "partly"]


def test_a_job_that_is_not_succeeded_shows_no_verdict_even_with_a_result_held() -> None:
    # Whatever result a job that has not succeeded carries, it is not a final grade.
    running = job(JobStatus.RUNNING, GRADED)
    assert criteria_cells(running, 3) == ["", "", ""]
    assert criteria_cells(job(JobStatus.FAILED), 2) == ["", ""]


# --- a submission's row -----------------------------------------------------------------

T1 = datetime(2026, 12, 3, 10, 30, tzinfo=UTC)


def reviewed(graded: Job, teacher_grade: GradeResult) -> Job:
    """`graded` with a teacher's override of its grade, reviewed at T1."""
    review = Review(1, "key:ms", T1, ReviewDecision.OVERRIDE, "partial credit", teacher_grade)
    state = ReviewState(ReviewStatus.HELD, (HoldReason.SAMPLED,), Release.IMMEDIATELY, T0, 0)
    return dataclasses.replace(graded, review=state.reviewed(review))


def test_a_job_not_succeeded_has_no_final_grade_source_or_feedback_in_its_row() -> None:
    row = grade_row(job(JobStatus.RUNNING, GRADED))
    assert (row["final_score"], row["final_source"], row["feedback"]) == (None, None, None)
    assert row["model_score"] == 7 and row["status"] == "RUNNING"


def test_a_reviewed_and_posted_row_says_when_it_was_reviewed_and_posted() -> None:
    teacher = GradeResult(score=9, max_score=20, feedback="better")
    graded = reviewed(job(JobStatus.SUCCEEDED, GRADED), teacher).post(T1 + timedelta(hours=1), "t")
    row = grade_row(graded)
    assert row["final_score"] == row["teacher_score"] == 9 and row["final_source"] == "teacher"
    assert (row["reviewer"], row["reason"], row["review_status"]) == (
        "key:ms",
        "partial credit",
        "reviewed",
    )
    assert row["reviewed_at"] == "2026-12-03T10:30:00+00:00"
    assert row["posted_at"] == "2026-12-03T11:30:00+00:00"


def test_an_unreviewed_unposted_row_has_no_review_or_post_time() -> None:
    row = grade_row(job(JobStatus.SUCCEEDED, GRADED))
    assert row["final_source"] == "model" and row["feedback"] == "ok"
    assert (row["reviewed_at"], row["posted_at"], row["review_status"]) == (None, None, None)


def test_the_prompt_version_is_the_model_grade_s_else_the_request_s() -> None:
    versioned = dataclasses.replace(GRADED, prompt_version="p2")
    assert (
        grade_row(job(JobStatus.SUCCEEDED, versioned, prompt_version="p1"))["prompt_version"]
        == "p2"
    )
    assert (
        grade_row(job(JobStatus.SUCCEEDED, GRADED, prompt_version="p1"))["prompt_version"] == "p1"
    )
    assert grade_row(job(JobStatus.PENDING, prompt_version="p1"))["prompt_version"] == "p1"


# --- the class statistics ---------------------------------------------------------------


def test_the_statistics_count_only_final_grades_and_those_a_teacher_decided() -> None:
    def scored(score: float) -> GradeResult:
        return GradeResult(score=score, max_score=20, feedback="ok")

    jobs = [
        job(JobStatus.FAILED, scored(20)),  # not graded, and before the graded ones
        reviewed(job(JobStatus.SUCCEEDED, scored(1)), scored(2)),
        reviewed(job(JobStatus.SUCCEEDED, scored(3)), scored(4)),
        job(JobStatus.RUNNING, scored(19)),
        job(JobStatus.SUCCEEDED, scored(9)),
    ]
    stats = ClassStatistics.of(jobs)
    assert (stats.graded, stats.by_teacher) == (3, 2)
    assert (stats.mean, stats.median, stats.minimum, stats.maximum) == (5, 4, 2, 9)
    assert stats.stdev == pytest.approx(math.sqrt(26 / 3))  # population: (9 + 1 + 16) / 3


def test_no_final_grade_gives_no_statistics() -> None:
    stats = ClassStatistics.of([job(JobStatus.FAILED, GRADED)])
    assert stats == ClassStatistics(0, None, None, None, None, None, 0)
