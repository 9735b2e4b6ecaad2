"""A whole assignment through the intake and the worker: batch, grading, one AssignmentGraded
per round, a regrade under a new rubric version and its report."""

from __future__ import annotations

from typing import Any

from flask.testing import FlaskClient

from services.intake.app import create_app as create_intake
from services.worker.app import create_app as create_worker
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.events import AssignmentGraded, GradingCompleted
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest
from tests.fakes import FakePublisher, FakeTaskQueue
from tests.unit.conftest import API_KEY, PUSH_TOKEN

AUTH = {"Authorization": f"Bearer {API_KEY}"}


class VersionGrader:
    """Scores an answer by its number, one point more under rubric version 2."""

    name = "by-version"

    def grade(self, request: GradingRequest, *, attempt: int, timeout_s: float) -> GradeResult:
        base = float(request.answer.rsplit(" ", 1)[-1])
        bonus = 1.0 if request.rubric_version == 2 else 0.0
        return GradeResult(base + bonus, request.max_score, "ok", grader=self.name)


def deliver_all(worker: FlaskClient, queue: FakeTaskQueue, since: int = 0) -> None:
    for task in queue.tasks[since:]:
        response = worker.post(
            "/tasks/grade",
            json={"job_id": task.job_id},
            headers={
                "Authorization": f"Bearer {PUSH_TOKEN}",
                "X-CloudTasks-TaskName": task.name,
                "X-CloudTasks-TaskRetryCount": "0",
            },
        )
        assert response.status_code < 300, response.get_json()


def graded(publisher: FakePublisher) -> list[AssignmentGraded]:
    return [e for e in publisher.events if isinstance(e, AssignmentGraded)]


def test_an_assignment_is_graded_regraded_and_reported_with_one_event_per_round(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    intake = create_intake(settings, adapters, clock).test_client()
    worker = create_worker(settings, adapters, VersionGrader(), clock).test_client()
    queue, publisher = adapters.queue, adapters.publisher
    assert isinstance(queue, FakeTaskQueue) and isinstance(publisher, FakePublisher)
    body: dict[str, Any] = {"title": "Essay", "rubric": "light; chlorophyll", "max_score": 10}
    created = intake.post("/v1/assignments", json=body, headers={**AUTH, "Idempotency-Key": "a"})
    assignment_id = created.get_json()["id"]
    answers = [{"submission_id": f"s{i}", "answer": f"answer {i}"} for i in range(5)]
    url = f"/v1/assignments/{assignment_id}"
    intake.post(f"{url}/submissions:batch", json={"answers": answers}, headers=AUTH)

    deliver_all(worker, queue)
    deliver_all(worker, queue)  # every task delivered twice: nothing more is announced
    [first] = graded(publisher)
    assert (first.round, first.submissions, first.succeeded, first.mean_score) == (0, 5, 5, 2.0)
    progress = intake.get(url, headers=AUTH).get_json()["progress"]
    assert progress["done"] is True and progress["mean_score"] == 2.0

    tasks_before = len(queue.tasks)
    regrade = intake.post(f"{url}/regrade", json={"rubric": "light only"}, headers=AUTH)
    assert regrade.status_code == 202, regrade.get_json()
    assert regrade.get_json()["rubric"]["version"] == 2
    assert len(queue.tasks) == tasks_before + 5
    busy = intake.post(f"{url}/regrade", json={}, headers=AUTH)
    assert busy.status_code == 409 and busy.get_json()["type"].endswith("assignment-busy")
    assert intake.get(url, headers=AUTH).get_json()["progress"]["done"] is False

    deliver_all(worker, queue, since=tasks_before)
    first_round, second = graded(publisher)
    assert first_round == first
    assert (second.round, second.submissions, second.mean_score) == (1, 5, 3.0)
    assert second.event_id != first.event_id
    completed = [e for e in publisher.events if isinstance(e, GradingCompleted)]
    assert len({e.event_id for e in completed}) == 10  # each generation's event its own id

    report = intake.get(f"{url}/regrade?threshold=0.5", headers=AUTH).get_json()
    assert report["round"] == 1 and report["compared"] == 5
    assert report["mean_shift"] == 1.0 and report["changed"] == 5
    assert sorted((c["old"], c["new"]) for c in report["changes"]) == [
        (float(i), float(i + 1)) for i in range(5)
    ]
    assert report["kappa"] is not None and 0 < report["kappa"] < 1
    job = adapters.store.get(report["changes"][0]["job_id"])
    assert job is not None and job.request.rubric_version == 2
    assert job.regraded_from is not None and job.regraded_from.rubric_version == 1


def test_a_regrade_past_the_clients_ceiling_moves_what_fits_and_the_worker_resumes_it(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    tight = settings.model_copy(update={"max_active_jobs_per_client": 2})
    intake = create_intake(tight, adapters, clock).test_client()
    worker = create_worker(tight, adapters, VersionGrader(), clock).test_client()
    queue, publisher = adapters.queue, adapters.publisher
    assert isinstance(queue, FakeTaskQueue) and isinstance(publisher, FakePublisher)
    body: dict[str, Any] = {"title": "Essay", "rubric": "light", "max_score": 10}
    created = intake.post("/v1/assignments", json=body, headers={**AUTH, "Idempotency-Key": "a"})
    url = f"/v1/assignments/{created.get_json()['id']}"
    for start in (0, 2, 4):  # two at a time: the ceiling
        answers = [{"submission_id": f"s{i}", "answer": f"answer {i}"} for i in (start, start + 1)]
        sent = intake.post(f"{url}/submissions:batch", json={"answers": answers}, headers=AUTH)
        assert sent.get_json()["accepted"] == 2
        deliver_all(worker, queue, len(queue.tasks) - 2)

    regrade = intake.post(f"{url}/regrade", json={"rubric": "light only"}, headers=AUTH)

    assert regrade.status_code == 202, regrade.get_json()
    progress = intake.get(url, headers=AUTH).get_json()["progress"]
    assert (progress["submissions"], progress["waiting"]) == (2, 4)
    assert adapters.store.active_counts("client-a").client == 2  # the ceiling, not 6
    for _ in range(3):  # each wave graded lets the worker move the next one
        deliver_all(worker, queue, len(queue.tasks) - 2)
        assert adapters.store.active_counts("client-a").client <= 2
    progress = intake.get(url, headers=AUTH).get_json()["progress"]
    assert (progress["submissions"], progress["waiting"], progress["done"]) == (6, 0, True)
    # Round 0 ended after each batch of two; the regrade's round once, with all six.
    assert [(e.round, e.submissions) for e in graded(publisher)] == [
        (0, 2),
        (0, 4),
        (0, 6),
        (1, 6),
    ]
