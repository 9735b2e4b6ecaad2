"""Logs never carry answers: a whole job (submit, grade, hold, review, read, erase) leaves
no trace of the answer text, the feedback or the student id in any log line."""

from __future__ import annotations

import logging

import pytest

from services.intake.app import create_app as create_intake
from services.worker.app import create_app as create_worker
from shared.adapters.graders.rubric import RubricGrader
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from tests.fakes import FakeTaskQueue
from tests.unit.conftest import API_KEY
from tests.unit.test_assignment_flow import deliver_all

AUTH = {"Authorization": f"Bearer {API_KEY}"}
ANSWER = "Zebrafinch quartzite 4471 absorbs light"
STUDENT = "student-hypatia-0912"
FEEDBACK = "Teacher wrote: xylophone-nebula"


def test_a_full_job_logs_no_answer_feedback_or_student_id(
    settings: Settings,
    adapters: Adapters,
    clock: FrozenClock,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    reviewing = Settings(**{**settings.model_dump(), "reviewer_keys": "client-a/ms=rk"})
    intake = create_intake(reviewing, adapters, clock).test_client()
    worker = create_worker(reviewing, adapters, RubricGrader(simulate=False), clock).test_client()
    assert isinstance(adapters.queue, FakeTaskQueue)
    created = intake.post(
        "/v1/assignments",
        json={"title": "T", "rubric": "light; chlorophyll", "review": {"sample_rate": 1}},
        headers={**AUTH, "Idempotency-Key": "a"},
    ).get_json()
    body = {"submission_id": "s1", "answer": ANSWER, "student_id": STUDENT}
    batch = intake.post(
        f"/v1/assignments/{created['id']}/submissions:batch", json={"answers": [body]}, headers=AUTH
    ).get_json()
    job_id = batch["items"][0]["job_id"]
    deliver_all(worker, adapters.queue)
    review = {"decision": "override", "score": 9, "reason": "ok", "feedback": FEEDBACK}
    reviewed = intake.post(
        f"/v1/reviews/{job_id}", json=review, headers={"Authorization": "Bearer rk"}
    )
    assert reviewed.status_code == 200, reviewed.get_json()
    assert intake.get(f"/v1/grading-jobs/{job_id}", headers=AUTH).get_json()["result"]
    assert intake.delete(f"/v1/students/{STUDENT}", headers=AUTH).status_code == 200

    printed = capsys.readouterr()
    logged = printed.out + printed.err
    records = "\n".join(str(vars(r)) for r in caplog.records)
    assert "job completed" in logged and job_id in logged  # the logs were captured
    for secret in (ANSWER, "Zebrafinch", STUDENT, FEEDBACK):
        assert secret not in logged, secret
        assert secret not in records, secret
