"""Review rules: which grades are held for a teacher, and what the student sees meanwhile."""

from __future__ import annotations

from typing import Any

import pytest
from flask.testing import FlaskClient

from services.intake.app import create_app as create_intake
from services.worker.app import create_app as create_worker
from shared.adapters.graders.rubric import RubricGrader
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.events import GradingCompleted
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest
from shared.domain.review import HoldReason, Release, ReviewPolicy, ReviewStatus, sampled
from tests.fakes import FakePublisher, FakeTaskQueue
from tests.unit.conftest import API_KEY
from tests.unit.test_assignment_flow import deliver_all

AUTH = {"Authorization": f"Bearer {API_KEY}"}


def result(score: float, confidence: float | None = 0.9, format_retries: int = 0) -> GradeResult:
    return GradeResult(
        score, 10, "ok", confidence=confidence, format_retries=format_retries, grader="g"
    )


def test_each_rule_holds_a_grade_for_its_own_reason() -> None:
    policy = ReviewPolicy(confidence_below=0.6, pass_mark=5, margin=0.5, format_failures=True)
    assert policy.reasons("j", result(9)) == ()
    assert policy.reasons("j", result(9, confidence=0.59)) == (HoldReason.LOW_CONFIDENCE,)
    assert policy.reasons("j", result(9, confidence=None)) == ()
    assert policy.reasons("j", result(4.5)) == (HoldReason.NEAR_PASS_MARK,)
    assert policy.reasons("j", result(5.5)) == (HoldReason.NEAR_PASS_MARK,)
    assert policy.reasons("j", result(5.51)) == ()
    assert policy.reasons("j", result(9, format_retries=1)) == (HoldReason.FORMAT_FAILURE,)
    both = policy.reasons("j", result(5, confidence=0.1))
    assert both == (HoldReason.LOW_CONFIDENCE, HoldReason.NEAR_PASS_MARK)


def test_the_calibration_sample_is_a_repeatable_share_of_job_ids() -> None:
    ids = [f"job-{i}" for i in range(4000)]
    taken = [i for i in ids if sampled(i, 0.1)]
    assert taken == [i for i in ids if sampled(i, 0.1)]  # the same jobs every time
    assert 300 < len(taken) < 500  # about a tenth
    assert not any(sampled(i, 0) for i in ids) and all(sampled(i, 1) for i in ids)
    assert set(taken) <= {i for i in ids if sampled(i, 0.2)}  # a larger rate takes more


def test_the_offline_grader_reports_a_deterministic_confidence() -> None:
    grader = RubricGrader(simulate=False)
    rubric = ("mentions chlorophyll pigment", "mentions sunlight energy")

    def confidence(answer: str) -> float | None:
        request = GradingRequest("s", answer, rubric)
        return grader.grade(request, attempt=1, timeout_s=5).confidence

    # Every term of both criteria present, or none: certain either way.
    assert confidence("chlorophyll pigment absorbs sunlight energy") == 1.0
    assert confidence("an unrelated answer") == 1.0
    # Half of each criterion's terms: a coin toss on both.
    assert confidence("chlorophyll and sunlight") == 0.0
    assert confidence("chlorophyll pigment and sunlight") == 0.5


def create_assignment(intake: FlaskClient, review: dict[str, Any]) -> str:
    body = {"title": "Essay", "rubric": "light; chlorophyll", "max_score": 10, "review": review}
    created = intake.post("/v1/assignments", json=body, headers={**AUTH, "Idempotency-Key": "a"})
    assert created.status_code == 201, created.get_json()
    assert created.get_json()["review"]["release"] == review["release"]
    return str(created.get_json()["id"])


def submit(intake: FlaskClient, assignment_id: str, answers: list[str]) -> list[str]:
    body = {"answers": [{"submission_id": f"s{i}", "answer": a} for i, a in enumerate(answers)]}
    url = f"/v1/assignments/{assignment_id}/submissions:batch"
    response = intake.post(url, json=body, headers=AUTH)
    assert response.status_code < 300, response.get_json()
    return [item["job_id"] for item in response.get_json()["items"]]


@pytest.mark.parametrize("release", [r.value for r in Release])
def test_a_held_grade_waits_for_review_only_when_released_after_review(
    settings: Settings, adapters: Adapters, clock: FrozenClock, release: str
) -> None:
    intake = create_intake(settings, adapters, clock).test_client()
    worker = create_worker(settings, adapters, RubricGrader(simulate=False), clock).test_client()
    queue, publisher = adapters.queue, adapters.publisher
    assert isinstance(queue, FakeTaskQueue) and isinstance(publisher, FakePublisher)
    # Pass mark 5 within 0: a half-right answer (5 of 10) is held, a full one is not.
    assignment_id = create_assignment(intake, {"pass_mark": 5, "release": release})
    held_id, clear_id = submit(intake, assignment_id, ["light only", "light and chlorophyll"])

    deliver_all(worker, queue)
    deliver_all(worker, queue)  # delivered twice: still one announcement at most

    held = adapters.store.get(held_id)
    clear = adapters.store.get(clear_id)
    assert held is not None and held.review is not None and clear is not None
    assert held.review.status is ReviewStatus.HELD
    assert held.review.reasons == (HoldReason.NEAR_PASS_MARK,)
    assert clear.review is None
    completed = [e.job_id for e in publisher.events if isinstance(e, GradingCompleted)]
    view = intake.get(f"/v1/grading-jobs/{held_id}", headers=AUTH).get_json()
    assert view["status"] == "SUCCEEDED" and view["review"]["status"] == "held"
    if release == "after_review":
        assert completed == [clear_id]
        assert "result" not in view
    else:
        assert sorted(completed) == sorted([held_id, clear_id])
        assert view["result"]["score"] == 5.0
