"""The grade sheet's criterion cells: a final grade's verdict per criterion, nothing for a
job without one, an empty cell where a verdict names no score, and padding to the rubric."""

from __future__ import annotations

from shared.domain.grade import GradeResult
from shared.domain.grade_sheet import criteria_cells
from shared.domain.status import JobStatus
from tests.unit.test_erasure_domain_decisions import job

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
