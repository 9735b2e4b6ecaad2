"""The teacher's grade a regrade request's change makes, pinned: what it takes from the
change, what it keeps of the grade the student saw, and whose grade it is."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from flask.testing import FlaskClient

from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.errors import ValidationFailed
from shared.domain.grade import GradeResult
from shared.domain.review import RequestAnswer
from shared.service_layer.regrade_requests import Change, _changed
from tests.unit.test_regrade_requests import (
    _answer,
    _ask,
    _assignment,
    _graded,
    _open_until,
)
from tests.unit.test_school_policy import intake_of

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


@pytest.fixture
def intake(settings: Settings, adapters: Adapters, clock: FrozenClock) -> FlaskClient:
    return intake_of(settings, adapters, clock)


def _refusal(
    intake: FlaskClient, job_id: str, answer: str, reason: str, score: float | None
) -> Any:
    service = intake.application.extensions["gradeq.regrade_requests"]
    change = Change(score) if score is not None else None
    with pytest.raises(ValidationFailed) as refused:
        service.answer("client-a", job_id, RequestAnswer(answer), reason, change)
    return refused.value.detail, refused.value.extensions["errors"]


def test_a_refused_answer_says_what_is_wrong_and_where(
    intake: FlaskClient, settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    assignment_id = _assignment(intake, clock, **_open_until(clock))
    job_id = _graded(intake, settings, adapters, clock, assignment_id)
    assert _ask(intake, job_id).status_code == 201
    score = [{"field": "score", "message": "required with change, only with it"}]
    for answer, with_score in (("change", None), ("keep", 3.0)):
        assert _refusal(intake, job_id, answer, "r", with_score) == (
            "a change takes a score, a keep none",
            score,
        )
    assert _refusal(intake, job_id, "keep", " ", None) == (
        "an answer needs a reason",
        [{"field": "reason", "message": "required"}],
    )
    assert _refusal(intake, job_id, "change", "r", 10.5) == (
        "the score is above the job's max score 10",
        [{"field": "score", "message": "above the max score"}],
    )


def test_a_change_to_the_max_score_is_the_next_review_by_the_teacher_of_that_generation(
    intake: FlaskClient, settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    assignment_id = _assignment(intake, clock, **_open_until(clock))
    job_id = _graded(intake, settings, adapters, clock, assignment_id)
    assert _ask(intake, job_id).status_code == 201
    before = adapters.store.get(job_id)
    assert before is not None and before.review is not None
    clock.advance(timedelta(hours=1))
    changed = _answer(intake, job_id, {"answer": "change", "score": 10, "reason": "all there"})
    assert changed.status_code == 200, changed.get_json()
    job = adapters.store.get(job_id)
    assert job is not None and job.review is not None and job.regrade_request is not None
    review = job.review.reviews[-1]
    assert review.number == len(before.review.reviews) + 1
    assert review.generation == job.generation and review.at == clock.now()
    assert review.result.score == 10 and review.result.grader == f"reviewer:{review.by}"
    asked = job.regrade_request
    assert (asked.answered_by, asked.answered_at) == (review.by, clock.now())
    assert job.posted is not None and job.posted.by == review.by


def test_a_regrade_request_answer_without_an_open_request_names_the_job(
    intake: FlaskClient, settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    assignment_id = _assignment(intake, clock, **_open_until(clock))
    job_id = _graded(intake, settings, adapters, clock, assignment_id)
    refused = _answer(intake, job_id, {"answer": "keep", "reason": "fine"})
    assert refused.status_code == 409, refused.get_json()
    assert refused.get_json()["detail"] == f"job {job_id} has no open regrade request"
