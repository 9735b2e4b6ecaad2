"""The teacher's grade a regrade request's change makes, pinned: what it takes from the
change, what it keeps of the grade the student saw, and whose grade it is."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from flask.testing import FlaskClient

from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.authorization import Principal, Role
from shared.domain.errors import PROBLEM_BASE, ValidationFailed
from shared.domain.grade import GradeResult
from shared.domain.review import HoldReason, RequestAnswer
from shared.service_layer.regrade_requests import (
    Change,
    RegradeRequests,
    RegradeRequestsClosed,
    _changed,
)
from tests.unit.test_regrade_requests import (
    _answer,
    _ask,
    _assignment,
    _graded,
    _open_until,
)
from tests.unit.test_school_policy import (
    OTHER_STUDENT,
    TEACHER,
    intake_of,
    student_job,
)

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


def _refused(response: Any, slug: str) -> str:
    """The detail of a 409 refusal of `slug`."""
    assert response.status_code == 409, response.get_json()
    assert response.get_json()["type"] == PROBLEM_BASE + slug
    return str(response.get_json()["detail"])


def test_a_grade_of_no_assignment_is_refused_as_one_no_request_can_contest(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    practising = intake_of(
        settings.model_copy(update={"practice_clients": "client-a"}), adapters, clock
    )
    job_id = student_job(practising, "practice")
    assert _refused(_ask(practising, job_id), "regrade-requests-closed") == (
        "only a grade of an assignment can be contested"
    )


def test_without_an_assignment_store_no_grade_can_be_contested(
    intake: FlaskClient, settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    assignment_id = _assignment(intake, clock, **_open_until(clock))
    job_id = _graded(intake, settings, adapters, clock, assignment_id)
    reviews = intake.application.extensions["gradeq.reviews"]
    service = RegradeRequests(adapters.store, None, reviews, clock)
    with pytest.raises(RegradeRequestsClosed) as refused:
        service.request(Principal("client-a", "ada", Role.STUDENT), job_id, "see line 2")
    assert refused.value.detail == "only a grade of an assignment can be contested"
    job = adapters.store.get(job_id)
    assert job is not None and job.regrade_request is None


def test_an_assignment_without_a_deadline_says_it_takes_no_requests(
    intake: FlaskClient, settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    assignment_id = _assignment(intake, clock)
    job_id = _graded(intake, settings, adapters, clock, assignment_id)
    assert _refused(_ask(intake, job_id), "regrade-requests-closed") == (
        "the assignment takes no regrade requests"
    )


def test_a_request_at_the_deadline_is_refused_naming_it(
    intake: FlaskClient, settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    until = _open_until(clock)
    assignment_id = _assignment(intake, clock, **until)
    job_id = _graded(intake, settings, adapters, clock, assignment_id)
    clock.advance(datetime.fromisoformat(until["regrade_requests_until"]) - clock.now())
    assert _refused(_ask(intake, job_id), "regrade-requests-closed") == (
        f"regrade requests closed at {until['regrade_requests_until']}"
    )


def test_an_unknown_or_another_students_grade_is_not_found_by_its_id(
    intake: FlaskClient, settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    assignment_id = _assignment(intake, clock, **_open_until(clock))
    job_id = _graded(intake, settings, adapters, clock, assignment_id)
    for asked, who in ((job_id, OTHER_STUDENT), ("no-such-job", None)):
        response = _ask(intake, asked, who) if who else _ask(intake, asked)
        assert response.status_code == 404, response.get_json()
        assert response.get_json()["detail"] == f"no grading job {asked}"


def test_a_second_request_names_the_job_already_asked_about(
    intake: FlaskClient, settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    assignment_id = _assignment(intake, clock, **_open_until(clock))
    job_id = _graded(intake, settings, adapters, clock, assignment_id)
    assert _ask(intake, job_id).status_code == 201
    assert _refused(_ask(intake, job_id), "regrade-already-requested") == (
        f"a regrade of job {job_id} was already requested"
    )


@pytest.mark.parametrize(
    "withheld_by",
    [
        # 4 of 10 against a pass mark of 5 within 1: held for the teacher before release.
        {"review": {"pass_mark": 5, "margin": 1, "release": "after_review"}},
        {"posting": "manual"},  # graded, not yet posted by the teacher
    ],
)
def test_a_grade_withheld_from_the_student_is_not_released_to_ask_about(
    intake: FlaskClient,
    settings: Settings,
    adapters: Adapters,
    clock: FrozenClock,
    withheld_by: dict[str, Any],
) -> None:
    assignment_id = _assignment(intake, clock, **withheld_by, **_open_until(clock))
    job_id = _graded(intake, settings, adapters, clock, assignment_id)
    held = adapters.store.get(job_id)
    assert held is not None and held.result is not None and held.withheld
    assert _refused(_ask(intake, job_id), "grade-not-released") == (
        f"job {job_id} has no released grade"
    )
    job = adapters.store.get(job_id)
    assert job is not None and job.regrade_request is None


def test_a_request_on_a_reviewed_grade_keeps_the_teachers_grade_and_reviews(
    intake: FlaskClient, settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    review = {"review": {"pass_mark": 5, "margin": 1}}
    assignment_id = _assignment(intake, clock, **review, **_open_until(clock))
    job_id = _graded(intake, settings, adapters, clock, assignment_id)
    decided = intake.post(
        f"/v1/reviews/{job_id}",
        json={"decision": "override", "score": 9, "reason": "generous"},
        headers=TEACHER,
    )
    assert decided.status_code == 200, decided.get_json()
    before = adapters.store.get(job_id)
    assert before is not None and before.review is not None
    clock.advance(timedelta(minutes=5))
    asked = _ask(intake, job_id)
    assert asked.status_code == 201, asked.get_json()
    assert asked.get_json()["result"]["score"] == 9  # the teacher's grade, as released
    job = adapters.store.get(job_id)
    assert job is not None and job.review is not None
    assert job.updated_at == clock.now()
    assert job.review.reviews == before.review.reviews
    assert job.review.reasons == (*before.review.reasons, HoldReason.REGRADE_REQUEST)
    assert job.review.held_at == clock.now()
