"""Students' regrade requests: asked once per grade with a reason, before the assignment's
deadline, into the teacher's queue; answered keep or change with a reason, a change being
a teacher's grade beside the model's, posted as the next version of the posted grade
(`GradePosted`, published once with the answer's review)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from flask.testing import FlaskClient

from services.worker.app import create_app as create_worker
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.errors import PROBLEM_BASE
from shared.domain.events import GradePosted, GradeReviewed
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest
from tests.fakes import FakePublisher, FakeTaskQueue
from tests.unit.test_assignment_flow import deliver_all
from tests.unit.test_school_policy import OTHER_STUDENT, SERVER, STUDENT, TEACHER, intake_of


class FixedGrader:
    """Scores every answer 4 of the max score, with feedback."""

    name = "fixed"

    def grade(self, request: GradingRequest, *, attempt: int, timeout_s: float) -> GradeResult:
        return GradeResult(4.0, request.max_score, "the model's feedback", grader=self.name)


@pytest.fixture
def intake(settings: Settings, adapters: Adapters, clock: FrozenClock) -> FlaskClient:
    return intake_of(settings, adapters, clock)


def _posted(adapters: Adapters, job_id: str) -> list[GradePosted]:
    """The posted grade's versions the app published (the job topic's `GradePosted`)."""
    publisher = adapters.publisher
    assert isinstance(publisher, FakePublisher)
    return [e for e in publisher.events if isinstance(e, GradePosted) and e.job_id == job_id]


def _assignment(intake: FlaskClient, clock: FrozenClock, **settings: Any) -> str:
    body = {"title": "Leaves", "rubric": "light; chlorophyll", "max_score": 10, **settings}
    created = intake.post("/v1/assignments", json=body, headers={**SERVER, "Idempotency-Key": "a"})
    assert created.status_code == 201, created.get_json()
    return str(created.get_json()["id"])


def _graded(
    intake: FlaskClient,
    settings: Settings,
    adapters: Adapters,
    clock: FrozenClock,
    assignment_id: str,
    who: dict[str, str] = STUDENT,
) -> str:
    """The student's answer to the assignment, graded by the worker."""
    queue = adapters.queue
    assert isinstance(queue, FakeTaskQueue)
    since = len(queue.tasks)
    body = {"submission_id": "mine", "answer": "light", "assignment_id": assignment_id}
    sent = intake.post("/v1/grading-jobs", json=body, headers={**who, "Idempotency-Key": "k"})
    assert sent.status_code == 202, sent.get_json()
    worker = create_worker(settings, adapters, FixedGrader(), clock).test_client()
    deliver_all(worker, queue, since)
    return str(sent.get_json()["id"])


def _ask(intake: FlaskClient, job_id: str, who: dict[str, str] = STUDENT) -> Any:
    return intake.post(
        f"/v1/grading-jobs/{job_id}/regrade-request",
        json={"reason": "I did name chlorophyll, in the second line"},
        headers=who,
    )


def _answer(intake: FlaskClient, job_id: str, body: dict[str, Any]) -> Any:
    return intake.post(f"/v1/reviews/{job_id}/request", json=body, headers=TEACHER)


def _problem(response: Any, status: int, slug: str) -> None:
    assert response.status_code == status, response.get_json()
    assert response.get_json()["type"] == PROBLEM_BASE + slug


def _open_until(clock: FrozenClock) -> dict[str, str]:
    return {"regrade_requests_until": (clock.now() + timedelta(days=7)).isoformat()}


def test_a_request_lands_in_the_teachers_queue_and_a_change_is_a_new_posted_version(
    intake: FlaskClient,
    settings: Settings,
    adapters: Adapters,
    clock: FrozenClock,
) -> None:
    assignment_id = _assignment(intake, clock, **_open_until(clock))
    job_id = _graded(intake, settings, adapters, clock, assignment_id)
    # Posted automatically when graded: version 1, the model's grade.
    assert [(p.version, p.score, p.source) for p in _posted(adapters, job_id)] == [
        (1, 4.0, "model")
    ]

    asked = _ask(intake, job_id)
    assert asked.status_code == 201, asked.get_json()
    assert len(_posted(adapters, job_id)) == 1  # asking changes no posted grade
    request = asked.get_json()["regrade_request"]
    assert request["reason"] == "I did name chlorophyll, in the second line"
    assert request["by"] == "ada" and request["answer"] is None
    assert asked.get_json()["result"]["score"] == 4  # the student still sees their grade

    queue = intake.get("/v1/reviews", headers=TEACHER).get_json()["reviews"]
    [held] = [r for r in queue if r["job_id"] == job_id]
    assert held["reasons"] == ["regrade-request"]
    assert held["regrade_request"]["reason"] == request["reason"]
    # The review queue's own decisions do not answer a student's request.
    _problem(
        intake.post(f"/v1/reviews/{job_id}", json={"decision": "accept"}, headers=TEACHER),
        409,
        "regrade-request-open",
    )

    clock.advance(timedelta(hours=1))
    changed = _answer(
        intake,
        job_id,
        {"answer": "change", "score": 7, "reason": "chlorophyll is there", "feedback": "Fair."},
    )
    assert changed.status_code == 200, changed.get_json()
    detail = changed.get_json()
    assert detail["result"]["score"] == 7 and detail["model_result"]["score"] == 4
    assert [(r["decision"], r["result"]["score"]) for r in detail["reviews"]] == [("override", 7)]
    assert detail["regrade_request"]["answer"] == "change"
    assert detail["regrade_request"]["answer_reason"] == "chlorophyll is there"

    mine = intake.get(f"/v1/grading-jobs/{job_id}", headers=STUDENT).get_json()
    assert mine["result"]["score"] == 7 and mine["regrade_request"]["answer"] == "change"
    assert intake.get("/v1/reviews", headers=TEACHER).get_json()["reviews"] == []
    [first, version] = _posted(adapters, job_id)
    assert version.event_id != first.event_id
    assert version.data() == {
        "school": "client-a",
        "assignment_id": assignment_id,
        "student_id": "ada",
        "submission_id": "mine",
        "job_id": job_id,
        "version": 2,
        "score": 7.0,
        "max_score": 10.0,
        "source": "teacher",
        "feedback": "Fair.",
        "grading_progress": "FullyGraded",
        "posted_at": clock.now().isoformat(),
        "reason": "chlorophyll is there",
    }
    publisher = adapters.publisher
    assert isinstance(publisher, FakePublisher)
    reviewed = [e for e in publisher.events if isinstance(e, GradeReviewed)]
    assert [(e.job_id, e.decision, e.score) for e in reviewed] == [(job_id, "override", 7.0)]
    # Answered: neither the student nor the teacher goes round again.
    _problem(_ask(intake, job_id), 409, "regrade-already-requested")
    _problem(
        _answer(intake, job_id, {"answer": "keep", "reason": "again"}),
        409,
        "no-open-regrade-request",
    )


def test_a_kept_grade_keeps_its_score_and_is_posted_as_the_teachers(
    intake: FlaskClient,
    settings: Settings,
    adapters: Adapters,
    clock: FrozenClock,
) -> None:
    assignment_id = _assignment(intake, clock, **_open_until(clock))
    job_id = _graded(intake, settings, adapters, clock, assignment_id)
    assert _ask(intake, job_id).status_code == 201
    kept = _answer(intake, job_id, {"answer": "keep", "reason": "the rubric asks for both"})
    assert kept.status_code == 200, kept.get_json()
    detail = kept.get_json()
    assert detail["result"]["score"] == 4
    assert [r["decision"] for r in detail["reviews"]] == ["accept"]
    assert detail["regrade_request"]["answer"] == "keep"
    # As a review's accept: the same score, now the teacher's grade, the next version.
    assert [(p.version, p.score, p.source, p.reason) for p in _posted(adapters, job_id)] == [
        (1, 4.0, "model", ""),
        (2, 4.0, "teacher", "the rubric asks for both"),
    ]
    # Looking again publishes nothing more.
    assert intake.get(f"/v1/reviews/{job_id}", headers=TEACHER).status_code == 200
    assert len(_posted(adapters, job_id)) == 2


def test_a_grade_is_asked_about_once(
    intake: FlaskClient, settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    assignment_id = _assignment(intake, clock, **_open_until(clock))
    job_id = _graded(intake, settings, adapters, clock, assignment_id)
    assert _ask(intake, job_id).status_code == 201
    _problem(_ask(intake, job_id), 409, "regrade-already-requested")


def test_after_the_deadline_or_without_one_a_request_is_refused(
    intake: FlaskClient, settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    assignment_id = _assignment(intake, clock, **_open_until(clock))
    job_id = _graded(intake, settings, adapters, clock, assignment_id)
    clock.advance(timedelta(days=7))
    _problem(_ask(intake, job_id), 409, "regrade-requests-closed")
    # The teacher opens requests again: the student asks.
    until = (clock.now() + timedelta(days=1)).isoformat()
    patched = intake.patch(
        f"/v1/assignments/{assignment_id}",
        json={"regrade_requests_until": until},
        headers=SERVER,
    )
    assert patched.status_code == 200, patched.get_json()
    assert patched.get_json()["regrade_requests_until"] == until
    assert patched.get_json()["rubric"]["version"] == 1
    assert _ask(intake, job_id).status_code == 201


def test_an_assignment_without_a_deadline_takes_no_requests(
    intake: FlaskClient, settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    assignment_id = _assignment(intake, clock)
    job_id = _graded(intake, settings, adapters, clock, assignment_id)
    _problem(_ask(intake, job_id), 409, "regrade-requests-closed")


def test_another_students_grade_is_not_found_and_staff_do_not_ask(
    intake: FlaskClient, settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    assignment_id = _assignment(intake, clock, **_open_until(clock))
    job_id = _graded(intake, settings, adapters, clock, assignment_id)
    _problem(_ask(intake, job_id, OTHER_STUDENT), 404, "job-not-found")
    _problem(_ask(intake, job_id, TEACHER), 403, "forbidden")
    _problem(_ask(intake, "no-such-job"), 404, "job-not-found")
    # The student answers nothing: their own request is the teacher's to answer.
    assert _ask(intake, job_id).status_code == 201
    answered = intake.post(
        f"/v1/reviews/{job_id}/request", json={"answer": "keep", "reason": "x"}, headers=STUDENT
    )
    _problem(answered, 403, "forbidden")


def test_an_answer_needs_a_reason_and_a_change_a_score(
    intake: FlaskClient, settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    assignment_id = _assignment(intake, clock, **_open_until(clock))
    job_id = _graded(intake, settings, adapters, clock, assignment_id)
    assert _ask(intake, job_id).status_code == 201
    for body in (
        {"answer": "keep"},
        {"answer": "keep", "reason": "  "},
        {"answer": "change", "reason": "better"},
        {"answer": "keep", "reason": "fine", "score": 3},
        {"answer": "change", "reason": "better", "score": 11},
    ):
        refused = _answer(intake, job_id, body)
        assert refused.status_code == 400, (body, refused.get_json())
        assert refused.get_json()["type"] == PROBLEM_BASE + "validation-error"


def test_a_change_whose_announcement_was_cut_off_is_posted_on_the_next_look_once(
    intake: FlaskClient,
    settings: Settings,
    adapters: Adapters,
    clock: FrozenClock,
) -> None:
    assignment_id = _assignment(intake, clock, **_open_until(clock))
    job_id = _graded(intake, settings, adapters, clock, assignment_id)
    assert _ask(intake, job_id).status_code == 201
    publisher = adapters.publisher
    assert isinstance(publisher, FakePublisher)
    publisher.failures = 1  # the bus is down when the answer is announced
    body = {"answer": "change", "score": 6, "reason": "see the second line"}
    _problem(_answer(intake, job_id, body), 503, "dependency-unavailable")
    assert [p.version for p in _posted(adapters, job_id)] == [1]
    # The change is recorded; the next look at it announces it, with the same version.
    shown = intake.get(f"/v1/reviews/{job_id}", headers=TEACHER)
    assert shown.status_code == 200 and shown.get_json()["result"]["score"] == 6
    intake.get(f"/v1/reviews/{job_id}", headers=TEACHER)
    assert [(p.version, p.score, p.reason) for p in _posted(adapters, job_id)] == [
        (1, 4.0, ""),
        (2, 6.0, "see the second line"),
    ]


def _regrade_class(
    intake: FlaskClient, settings: Settings, adapters: Adapters, clock: FrozenClock, aid: str
) -> None:
    """The teacher regrades the class; the worker grades every submission again."""
    queue = adapters.queue
    assert isinstance(queue, FakeTaskQueue)
    since = len(queue.tasks)
    started = intake.post(f"/v1/assignments/{aid}/regrade", json={}, headers=SERVER)
    assert started.status_code == 202, started.get_json()
    assert len(queue.tasks) > since
    worker = create_worker(settings, adapters, FixedGrader(), clock).test_client()
    deliver_all(worker, queue, since)


@pytest.mark.parametrize("reviewed_before", [False, True])
def test_an_open_request_stays_held_with_its_request_through_a_class_regrade(
    intake: FlaskClient,
    settings: Settings,
    adapters: Adapters,
    clock: FrozenClock,
    reviewed_before: bool,
) -> None:
    # Reviewed before: a grade near the pass mark is held, and the teacher gave their own.
    review = {"review": {"pass_mark": 5, "margin": 1}} if reviewed_before else {}
    assignment_id = _assignment(intake, clock, **review, **_open_until(clock))
    job_id = _graded(intake, settings, adapters, clock, assignment_id)
    if reviewed_before:
        # A teacher's grade first: a regrade moving away from it flags it as well.
        decided = intake.post(
            f"/v1/reviews/{job_id}",
            json={"decision": "override", "score": 9, "reason": "generous"},
            headers=TEACHER,
        )
        assert decided.status_code == 200, decided.get_json()
    clock.advance(timedelta(minutes=5))
    assert _ask(intake, job_id).status_code == 201
    [before] = [
        r
        for r in intake.get("/v1/reviews", headers=TEACHER).get_json()["reviews"]
        if r["job_id"] == job_id
    ]

    clock.advance(timedelta(hours=1))
    _regrade_class(intake, settings, adapters, clock, assignment_id)

    job = intake.get(f"/v1/grading-jobs/{job_id}", headers=SERVER).get_json()
    assert job["status"] == "SUCCEEDED"
    [held] = [
        r
        for r in intake.get("/v1/reviews", headers=TEACHER).get_json()["reviews"]
        if r["job_id"] == job_id
    ]
    assert "regrade-request" in held["reasons"]
    assert held["held_at"] == before["held_at"]  # its place in the queue
    assert held["regrade_request"]["reason"] == before["regrade_request"]["reason"]
    # The teacher answers it as before; the answer is posted once.
    versions = len(_posted(adapters, job_id))
    changed = _answer(intake, job_id, {"answer": "change", "score": 8, "reason": "seen"})
    assert changed.status_code == 200, changed.get_json()
    assert changed.get_json()["regrade_request"]["answer"] == "change"
    [posted] = _posted(adapters, job_id)[versions:]
    assert (posted.score, posted.source, posted.reason) == (8.0, "teacher", "seen")
