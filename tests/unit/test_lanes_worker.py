"""A job stays in its lane: deferral, the recovery sweep and an operator's replay use its queue."""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from pathlib import Path

import pytest

from services.worker.app import create_app
from shared.adapters.graders.lane_quota import LaneQuota, LaneQuotaLimiter
from shared.adapters.graders.lanes import LaneGraders
from shared.adapters.graders.limiter import QuotaShare
from shared.adapters.graders.llm import ModelGrader
from shared.adapters.graders.shared_quota import SharedQuotaLimiter
from shared.bootstrap import Adapters
from shared.bootstrap.graders import grader_for
from shared.clock import FrozenClock
from shared.config.queues import DEFAULT_QUEUES_FILE
from shared.config.settings import GraderKind, QuotaMode, Settings
from shared.domain.errors import ProviderQuotaExhausted, ProviderUnavailable
from shared.domain.grade import GradeResult
from shared.domain.ids import job_id_for, task_name_for
from shared.domain.job import GradingRequest, Job, JobError
from shared.domain.status import JobStatus
from shared.ports import TaskSpec
from shared.service_layer.admin import AdminService
from shared.service_layer.recovery import RecoveryService
from tests.fakes import FakeTaskQueue, ScriptedGrader
from tests.unit.conftest import PUSH_TOKEN
from tests.unit.test_worker_api import AUTH, deliver


def seed_in(adapters: Adapters, clock: FrozenClock, lane: str, key: str = "k") -> str:
    job_id = job_id_for("client-a", key)
    request = GradingRequest(submission_id="s", answer="a", rubric="r", max_score=10)
    adapters.store.create(Job.new(job_id, "client-a", request, "fp", clock.now(), lane=lane))
    return job_id


def fake(adapters: Adapters) -> FakeTaskQueue:
    assert isinstance(adapters.queue, FakeTaskQueue)
    return adapters.queue


def test_a_deferred_job_goes_on_in_its_own_lane(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    grader = ScriptedGrader(ProviderQuotaExhausted("no room", retry_after_s=3))
    client = create_app(settings, adapters, grader, clock).test_client()
    job_id = seed_in(adapters, clock, "bulk")
    assert deliver(client, job_id, 0, **{"X-CloudTasks-QueueName": "bulk"}).status_code == 200
    [task] = fake(adapters).tasks
    assert (task.name, task.queue) == (task_name_for(job_id, 0, 1), "bulk")
    job = adapters.store.get(job_id)
    assert job is not None and job.lane == "bulk" and job.attempts == 0


def test_the_sweep_asks_and_replays_in_the_jobs_lane(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    queue = fake(adapters)
    job_id = seed_in(adapters, clock, "exam")
    queue.enqueue(TaskSpec(task_name_for(job_id, 0), job_id, queue="exam"))
    sweeper = RecoveryService(adapters.store, queue, adapters.publisher, clock, settings.budget())
    clock.advance(timedelta(minutes=30))
    assert sweeper.sweep().replayed == []  # its task is still in the exam queue
    queue.finish_all()
    assert sweeper.sweep().replayed == [job_id]
    assert queue.tasks[-1].queue == "exam"
    assert queue.tasks[-1].name == task_name_for(job_id, 1)


def test_the_sweep_leaves_a_paused_lanes_jobs_alone(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    queue = fake(adapters)
    job_id = seed_in(adapters, clock, "bulk")
    queue.pause("bulk")
    sweeper = RecoveryService(adapters.store, queue, adapters.publisher, clock, settings.budget())
    clock.advance(timedelta(minutes=30))
    # The job has no task anywhere, yet its lane is paused: nothing is replayed or failed.
    report = sweeper.sweep()
    assert (report.replayed, report.failed) == ([], [])
    assert queue.tasks == [] and queue.asked == []
    queue.resume("bulk")
    assert sweeper.sweep().replayed == [job_id]
    assert queue.tasks[-1].queue == "bulk"


def test_an_operators_replay_goes_to_the_jobs_lane(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    queue = fake(adapters)
    job_id = seed_in(adapters, clock, "exam")
    failed = Job.fail(
        adapters.store.get(job_id),  # type: ignore[arg-type]
        None,
        JobError("grading-permanent", "no"),
        clock.now(),
    )
    adapters.store.update(job_id, lambda _: failed)
    clock.advance(timedelta(minutes=5))  # past the announce lease
    admin = AdminService(adapters.store, queue, adapters.publisher, clock)
    replay = admin.replay(job_id, by="alice")
    assert replay.job.status is JobStatus.PENDING
    assert queue.tasks[-1].queue == "exam"


def test_a_lane_naming_its_own_model_grades_with_it(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    default, exam_model = ScriptedGrader(score=5.0), ScriptedGrader(score=9.0)
    grader = LaneGraders(default, {"exam": exam_model})
    client = create_app(settings, adapters, grader, clock).test_client()
    exam_job = seed_in(adapters, clock, "exam", key="e")
    bulk_job = seed_in(adapters, clock, "bulk", key="b")
    assert deliver(client, exam_job).status_code == 200
    assert deliver(client, bulk_job).status_code == 200
    assert (exam_model.calls, default.calls) == (1, 1)
    exam = adapters.store.get(exam_job)
    assert exam is not None and exam.result is not None and exam.result.score == 9.0


def test_the_quota_limiter_sees_the_lane_of_the_job_being_graded(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    limiter = LaneQuotaLimiter(QuotaShare(600), LaneQuota.of(settings.queues().values()), "grading")

    class Metered(ScriptedGrader):
        def grade(self, request: GradingRequest, *, attempt: int, timeout_s: float) -> GradeResult:
            limiter.acquire(10)
            return super().grade(request, attempt=attempt, timeout_s=timeout_s)

    client = create_app(settings, adapters, Metered(), clock).test_client()
    assert deliver(client, seed_in(adapters, clock, "exam", key="e")).status_code == 200
    assert deliver(client, seed_in(adapters, clock, "bulk", key="b")).status_code == 200
    assert limiter.in_window() == {"exam": 1, "grading": 0, "bulk": 1}


def test_the_model_graders_of_the_bootstrap_share_one_quota_by_lane(tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path,
        grader=GraderKind.OPENAI,
        grader_base_url="http://127.0.0.1:9/v1",
        grader_model="m-1",
    )
    grader = grader_for(settings)
    assert isinstance(grader, ModelGrader)
    assert isinstance(grader._limiter, SharedQuotaLimiter)  # one pool for every instance
    fixed = grader_for(settings.model_copy(update={"grader_quota_mode": QuotaMode.INSTANCE}))
    assert isinstance(fixed, ModelGrader)
    assert isinstance(fixed._limiter, LaneQuotaLimiter)


def test_the_recovery_sweep_logs_each_lanes_oldest_job_for_its_alert(
    settings: Settings, adapters: Adapters, clock: FrozenClock, caplog: pytest.LogCaptureFixture
) -> None:
    client = create_app(settings, adapters, ScriptedGrader(), clock).test_client()
    logging.getLogger().addHandler(caplog.handler)  # the app set up its own log handlers
    caplog.set_level(logging.INFO)
    seed_in(adapters, clock, "exam")
    fake(adapters).enqueue(TaskSpec("t", job_id_for("client-a", "k"), queue="exam"))
    clock.advance(timedelta(minutes=5))
    assert client.post("/tasks/recover", headers=AUTH).status_code == 200
    lines = {r.__dict__["lane"]: r for r in caplog.records if r.getMessage() == "lane figures"}
    assert set(lines) == {"exam", "grading", "bulk"}
    exam = lines["exam"]
    assert exam.__dict__["event"] == "lane_figures" and exam.__dict__["backlog"] == 1
    assert exam.__dict__["oldest_age_s"] == 300.0 and exam.__dict__["objective_s"] == 60.0
    assert exam.levelno == logging.WARNING  # past its objective
    assert lines["bulk"].__dict__["oldest_age_s"] == 0.0


def test_each_lane_retries_on_its_own_config(
    tmp_path: Path, adapters: Adapters, clock: FrozenClock
) -> None:
    queues = json.loads(DEFAULT_QUEUES_FILE.read_text())
    queues["bulk"]["retry_config"]["max_attempts"] = 3
    path = tmp_path / "queues.json"
    path.write_text(json.dumps(queues))
    settings = Settings(
        data_dir=tmp_path,
        push_token=PUSH_TOKEN,  # type: ignore[arg-type]
        queues_file=path,
        grader_timeout_s=5,
        lease_s=1,
        heartbeat_s=0.3,
    )
    grader = ScriptedGrader(*(ProviderUnavailable("503") for _ in range(2)))
    client = create_app(settings, adapters, grader, clock).test_client()
    standard, bulk = seed_in(adapters, clock, "grading", "g"), seed_in(adapters, clock, "bulk", "b")
    # The third delivery: not the last of the grading queue (6 attempts), the last of bulk's.
    assert deliver(client, standard, 2, **{"X-CloudTasks-QueueName": "grading"}).status_code == 500
    assert deliver(client, bulk, 2, **{"X-CloudTasks-QueueName": "bulk"}).status_code == 200
    assert adapters.store.get(standard).status is JobStatus.RETRYING  # type: ignore[union-attr]
    assert adapters.store.get(bulk).status is JobStatus.FAILED  # type: ignore[union-attr]


def test_a_lane_naming_a_model_gets_its_own_grader_from_the_bootstrap(tmp_path: Path) -> None:
    queues = json.loads(DEFAULT_QUEUES_FILE.read_text())
    queues["exam"]["lane"]["grader_model"] = "m-exam"
    path = tmp_path / "queues.json"
    path.write_text(json.dumps(queues))
    settings = Settings(
        data_dir=tmp_path,
        queues_file=path,
        grader=GraderKind.OPENAI,
        grader_base_url="http://127.0.0.1:9/v1",
        grader_model="m-1",
    )
    grader = grader_for(settings)
    assert isinstance(grader, LaneGraders)
    exam, bulk = grader.for_lane("exam"), grader.for_lane("bulk")
    assert isinstance(exam, ModelGrader) and isinstance(bulk, ModelGrader)
    assert (exam._chat.model, bulk._chat.model) == ("m-exam", "m-1")
    assert exam._limiter is not bulk._limiter  # each model has its own quota
