"""The teacher's grade a regrade request's change makes, pinned: what it takes from the
change, what it keeps of the grade the student saw, and whose grade it is."""

from __future__ import annotations

from shared.domain.grade import GradeResult
from shared.service_layer.regrade_requests import Change, _changed

SEEN = GradeResult(
    4.0,
    10.0,
    "the model's feedback",
    criteria=({"name": "light", "score": 4},),
    grader="gemini",
    model="gemini-2.5",
    prompt_version="v3",
    usage={"input_tokens": 10},
    confidence=0.9,
)


def test_a_change_with_criteria_and_feedback_takes_them_and_keeps_the_model_and_prompt() -> None:
    criteria = ({"name": "light", "score": 7},)
    changed = _changed(SEEN, Change(7.0, criteria=criteria, feedback="Fair."), "grace")
    assert changed == GradeResult(
        7.0,
        10.0,
        "Fair.",
        criteria=criteria,
        grader="reviewer:grace",
        model="gemini-2.5",
        prompt_version="v3",
    )


def test_a_change_of_the_score_alone_keeps_the_seen_criteria_and_feedback() -> None:
    changed = _changed(SEEN, Change(6.0), "grace")
    assert changed == GradeResult(
        6.0,
        10.0,
        "the model's feedback",
        criteria=SEEN.criteria,
        grader="reviewer:grace",
        model="gemini-2.5",
        prompt_version="v3",
    )
