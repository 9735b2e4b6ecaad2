"""Agreement between model and teacher on reviewed grades, worked out by hand; the admin API,
`gradeq assignments agreement` and the grade sheet's review columns."""

from __future__ import annotations

import csv
import io
from datetime import datetime, timedelta

import pytest

from services.intake.app import create_app as create_intake
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.agreement import agreement_of
from shared.domain.assignment import Assignment
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest, Job
from shared.domain.review import (
    HoldReason,
    Release,
    Review,
    ReviewDecision,
    ReviewState,
    ReviewStatus,
)
from tests.unit.conftest import API_KEY
from tests.unit.test_cli import as_json, gradeq, url  # noqa: F401

# Model m1 against the teacher on four answers, scores 0..2:
#   model  0 1 2 2
#   teach. 0 1 1 2
# Observed (rows model, columns teacher): [0][0]=1, [1][1]=1, [2][1]=1, [2][2]=1; row sums
# 1, 1, 2; column sums 1, 2, 1; weights (i-j)^2/4. Disagreement: w21 = 1/4. Expected:
# row 0: (0*1 + 1/4*2 + 1*1)/4 = 0.375; row 1: (1/4*1 + 0 + 1/4*1)/4 = 0.125;
# row 2: 2*(1*1 + 1/4*2 + 0)/4 = 0.75; in all 1.25. Kappa = 1 - 0.25/1.25 = 0.8.
M1 = [(0.0, 0.0), (1.0, 1.0), (2.0, 1.0), (2.0, 2.0)]
# Model m2 on one more answer: 2 where the teacher gave 0. With it, over all five:
# rows 1, 1, 3; columns 2, 2, 1; disagreement 1/4 + 1 = 1.25; expected
# (0.5 + 1 + 0.5 + 0.25 + 6 + 1.5)/5 = 1.95: kappa = 1 - 1.25/1.95 = 14/39.
M2 = [(2.0, 0.0)]


def test_agreement_on_a_small_set_matches_the_hand_computation() -> None:
    m1 = agreement_of([m for m, _ in M1], [t for _, t in M1], 2)
    assert (m1.reviewed, m1.exact_match_rate, m1.mean_absolute_difference) == (4, 0.75, 0.25)
    assert m1.kappa == pytest.approx(0.8)
    both = M1 + M2
    every = agreement_of([m for m, _ in both], [t for _, t in both], 2)
    assert (every.exact_match_rate, every.mean_absolute_difference) == (0.6, 0.6)
    assert every.kappa == pytest.approx(14 / 39)
    assert agreement_of([], [], 2).kappa is None


def reviewed(job: Job, model: str, score: float, teacher: float, at: datetime) -> Job:
    """`job` graded `score` by `model`, held, and reviewed to `teacher`."""
    model_grade = GradeResult(score, 2, "ok", model=model, prompt_version="grading-v1")
    state = ReviewState(ReviewStatus.HELD, (HoldReason.SAMPLED,), Release.IMMEDIATELY, at, 0)
    decision = ReviewDecision.ACCEPT if score == teacher else ReviewDecision.OVERRIDE
    teacher_grade = GradeResult(teacher, 2, "seen", grader="reviewer:key:ms")
    review = Review(1, "key:ms", at, decision, "checked", teacher_grade)
    claimed = job.claim("w", at, timedelta(seconds=30))
    return claimed.succeed("w", model_grade, at).hold(state).record_review(review, at)


def reviewed_assignment(adapters: Adapters, clock: FrozenClock) -> str:
    assert adapters.assignments is not None
    now = clock.now()
    assignment = Assignment.new("a-essay", "client-a", "Essay", "light", 2, "grading-v1", now)
    adapters.assignments.create(assignment)
    pairs = [("m1", m, t) for m, t in M1] + [("m2", m, t) for m, t in M2]
    for n, (model, score, teacher) in enumerate(pairs):
        request = GradingRequest(f"s{n}", "an answer", "light", 2, assignment_id=assignment.id)
        job = Job.new(f"job-{n}", "client-a", request, "fp", now)
        adapters.store.create(reviewed(job, model, score, teacher, now + timedelta(minutes=n)))
    return assignment.id


def test_the_admin_api_and_cli_report_agreement_by_model_and_prompt(
    url: str,  # noqa: F811
    adapters: Adapters,
    clock: FrozenClock,
) -> None:
    assignment_id = reviewed_assignment(adapters, clock)
    result = gradeq(url, "assignments", "agreement", assignment_id, "--json")
    assert result.exit_code == 0, result.output
    report = as_json(result)
    assert report["client_id"] == "client-a" and report["reviewed"] == 5
    assert report["quadratic_weighted_kappa"] == pytest.approx(14 / 39)
    by_model = {m["model"]: m for m in report["by_model"]}
    assert by_model["m1"]["prompt_version"] == "grading-v1"
    assert by_model["m1"]["quadratic_weighted_kappa"] == pytest.approx(0.8)
    assert by_model["m1"]["exact_match_rate"] == 0.75
    assert by_model["m2"]["mean_absolute_difference"] == 2.0
    assert sorted(map(tuple, report["pairs"])) == sorted(M1 + M2)
    table = gradeq(url, "assignments", "agreement", assignment_id)
    assert table.exit_code == 0 and "0.800" in table.stdout
    refused = gradeq(url, "assignments", "agreement", assignment_id, operator=False)
    assert refused.exit_code == 2  # the admin API needs the operator key


def test_the_grade_sheet_carries_the_review_beside_the_models_score(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    assignment_id = reviewed_assignment(adapters, clock)
    intake = create_intake(settings, adapters, clock).test_client()
    sheet = intake.get(
        f"/v1/assignments/{assignment_id}/grades",
        headers={"Authorization": f"Bearer {API_KEY}", "Accept": "text/csv"},
    )
    rows = list(csv.DictReader(io.StringIO(sheet.get_data(as_text=True))))
    by_submission = {r["submission_id"]: r for r in rows}
    overridden = by_submission["s2"]  # model 2, teacher 1
    assert (overridden["model_score"], overridden["teacher_score"]) == ("2.0", "1.0")
    assert (overridden["final_score"], overridden["final_source"]) == ("1.0", "teacher")
    assert (overridden["review_status"], overridden["reviewer"]) == ("reviewed", "key:ms")
    assert overridden["reason"] == "checked"
