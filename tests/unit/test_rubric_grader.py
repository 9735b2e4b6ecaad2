"""The offline grader: deterministic scores and the failures it can act out."""

from __future__ import annotations

from typing import Any

import pytest

from shared.adapters.graders.rubric import RubricGrader
from shared.domain.errors import GradingTimeout, PermanentGradingError, TransientGradingError
from shared.domain.job import GradingRequest
from shared.domain.rubric import criteria_of


def request(answer: str, rubric: Any, **metadata: Any) -> GradingRequest:
    return GradingRequest(
        submission_id="s", answer=answer, rubric=rubric, max_score=10, metadata=metadata
    )


def test_criteria_are_split_from_text() -> None:
    assert criteria_of("- names the capital\n- gives the river; dates it") == [
        "names the capital",
        "gives the river",
        "dates it",
    ]


def test_score_counts_met_criteria() -> None:
    grader = RubricGrader()
    req = request(
        "Photosynthesis turns light into sugar inside the chloroplast.",
        ("mentions photosynthesis", "names the chloroplast", "explains the Calvin cycle"),
    )
    result = grader.grade(req, attempt=1, timeout_s=5)
    assert result.score == pytest.approx(6.67)
    assert "Calvin" in result.feedback
    assert [c["met"] for c in result.criteria] == [True, True, False]
    assert grader.grade(req, attempt=2, timeout_s=5) == result


def test_transient_failures_stop_after_times() -> None:
    grader = RubricGrader()
    req = request("a b c", "alpha", simulate={"failure": "transient", "times": 2})
    for attempt in (1, 2):
        with pytest.raises(TransientGradingError):
            grader.grade(req, attempt=attempt, timeout_s=5)
    assert grader.grade(req, attempt=3, timeout_s=5).score == 0


def test_permanent_and_hang() -> None:
    grader = RubricGrader()
    with pytest.raises(PermanentGradingError):
        grader.grade(request("a", "b", simulate={"failure": "permanent"}), attempt=1, timeout_s=5)
    with pytest.raises(GradingTimeout):
        grader.grade(request("a", "b", simulate={"failure": "hang"}), attempt=1, timeout_s=0.05)
