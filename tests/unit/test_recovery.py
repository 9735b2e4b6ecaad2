"""The recovery sweep: stuck jobs are replayed under a new task name, then failed."""

from __future__ import annotations

from datetime import timedelta

import pytest

from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.grade import GradeResult
from shared.domain.ids import job_id_for, task_name_for
from shared.domain.job import GradingRequest, Job, JobError
from shared.domain.status import JobStatus
from shared.ports import TaskSpec
from shared.service_layer.recovery import RecoveryService
from tests.fakes import FakePublisher, FakeTaskQueue

LEASE = timedelta(seconds=10)


@pytest.fixture
def sweeper(settings: Settings, adapters: Adapters, clock: FrozenClock) -> RecoveryService:
    return RecoveryService(
        adapters.store, adapters.queue, adapters.publisher, clock, settings.budget()
    )


def seed(adapters: Adapters, clock: FrozenClock, key: str) -> str:
    job_id = job_id_for("c", key)
    request = GradingRequest(submission_id="s", answer="a", rubric="r")
    adapters.store.create(Job.new(job_id, "c", request, "fp", clock.now()))
    return job_id


def fakes(adapters: Adapters) -> tuple[FakeTaskQueue, FakePublisher]:
    assert isinstance(adapters.queue, FakeTaskQueue)
    assert isinstance(adapters.publisher, FakePublisher)
    return adapters.queue, adapters.publisher


def test_fresh_jobs_are_left_alone(
    sweeper: RecoveryService, adapters: Adapters, clock: FrozenClock
) -> None:
    seed(adapters, clock, "fresh")
    clock.advance(timedelta(seconds=1))  # younger than the sweep's staleness (2 leases)
    assert sweeper.sweep().as_dict() == {
        "replayed": [], "failed": [], "announced": [], "errors": []
    }  # fmt: skip


def test_stale_pending_job_gets_a_new_task_generation(
    sweeper: RecoveryService, adapters: Adapters, clock: FrozenClock
) -> None:
    job_id = seed(adapters, clock, "orphan")
    clock.advance(timedelta(hours=1))
    report = sweeper.sweep()
    assert report.replayed == [job_id]
    queue, _ = fakes(adapters)
    assert [t.name for t in queue.tasks] == [task_name_for(job_id, 1)]
    job = adapters.store.get(job_id)
    assert job is not None and job.generation == 1 and job.status is JobStatus.PENDING


def test_dead_attempt_is_replayed_but_a_live_one_is_not(
    sweeper: RecoveryService, adapters: Adapters, clock: FrozenClock
) -> None:
    job_id = seed(adapters, clock, "crashed")
    adapters.store.update(job_id, lambda j: j.claim("w1", clock.now(), timedelta(hours=2)))
    clock.advance(timedelta(hours=1))
    assert sweeper.sweep().replayed == []
    clock.advance(timedelta(hours=2))
    assert sweeper.sweep().replayed == [job_id]


def test_replay_budget_spent_fails_and_announces_once(
    sweeper: RecoveryService, adapters: Adapters, clock: FrozenClock
) -> None:
    job_id = seed(adapters, clock, "hopeless")
    queue, _ = fakes(adapters)
    for _ in range(3):
        clock.advance(timedelta(hours=1))
        assert sweeper.sweep().replayed == [job_id]
        clock.advance(timedelta(hours=1))
        assert sweeper.sweep().replayed == []  # its task is still queued
        queue.finish_all()
    clock.advance(timedelta(hours=1))
    report = sweeper.sweep()
    assert report.failed == [job_id]
    job = adapters.store.get(job_id)
    assert job is not None and job.status is JobStatus.FAILED and job.event_published
    assert job.error is not None and job.error.type == "retries-exhausted"
    _, publisher = fakes(adapters)
    assert [e.outcome.value for e in publisher.completions()] == ["failed"]
    clock.advance(timedelta(hours=1))
    assert sweeper.sweep().announced == []


def test_final_job_left_unannounced_is_announced(
    sweeper: RecoveryService, adapters: Adapters, clock: FrozenClock
) -> None:
    job_id = seed(adapters, clock, "silent")
    adapters.store.update(job_id, lambda j: j.claim("w1", clock.now(), LEASE))
    result = GradeResult(1, 10, "meh")
    adapters.store.update(job_id, lambda j: j.succeed("w1", result, clock.now()))
    clock.advance(timedelta(seconds=30))
    assert sweeper.sweep().announced == []  # the finishing attempt may still publish
    clock.advance(timedelta(minutes=5))
    assert sweeper.sweep().announced == [job_id]
    _, publisher = fakes(adapters)
    assert [e.job_id for e in publisher.completions()] == [job_id]


def test_job_whose_task_is_still_queued_is_not_replayed(
    sweeper: RecoveryService, adapters: Adapters, clock: FrozenClock
) -> None:
    job_id = seed(adapters, clock, "backlog")
    queue, _ = fakes(adapters)
    queue.enqueue(TaskSpec(task_name_for(job_id, 0), job_id))
    clock.advance(timedelta(hours=5))
    assert sweeper.sweep().as_dict()["replayed"] == []
    queue.finish_all()
    assert sweeper.sweep().replayed == [job_id]


def test_an_unreachable_queue_replays_nothing(
    sweeper: RecoveryService, adapters: Adapters, clock: FrozenClock
) -> None:
    seed(adapters, clock, "unknown")
    queue, _ = fakes(adapters)
    queue.available = False
    clock.advance(timedelta(hours=1))
    report = sweeper.sweep()
    assert report.replayed == [] and len(report.errors) == 1


def test_replays_keep_the_attempt_budget(
    sweeper: RecoveryService, settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    job_id = seed(adapters, clock, "spent")
    budget = settings.budget().job_max_attempts
    error = JobError("grading-transient", "429")
    for _ in range(budget):
        adapters.store.update(job_id, lambda j: j.claim("w", clock.now(), LEASE))
        adapters.store.update(job_id, lambda j: j.retry_later("w", error, clock.now()))
    clock.advance(timedelta(hours=1))
    report = sweeper.sweep()
    assert report.failed == [job_id] and report.replayed == []
    job = adapters.store.get(job_id)
    assert job is not None and job.attempts == budget and job.status is JobStatus.FAILED


def test_a_replayed_task_carries_the_job_id_and_now_as_its_schedule(
    sweeper: RecoveryService, adapters: Adapters, clock: FrozenClock
) -> None:
    job_id = seed(adapters, clock, "orphan-now")
    clock.advance(timedelta(hours=1))
    sweeper.sweep()
    queue, _ = fakes(adapters)
    assert queue.tasks == [TaskSpec(task_name_for(job_id, 1), job_id, clock.now())]


def test_a_replayed_scheduled_job_still_waits_for_its_not_before(
    sweeper: RecoveryService, adapters: Adapters, clock: FrozenClock
) -> None:
    due = clock.now() + timedelta(days=2)
    job_id = job_id_for("c", "scheduled")
    request = GradingRequest(submission_id="s", answer="a", rubric="r", not_before=due.isoformat())
    adapters.store.create(Job.new(job_id, "c", request, "fp", clock.now()))
    clock.advance(timedelta(hours=1))  # its task is gone (the fake queue holds none)
    assert sweeper.sweep().replayed == [job_id]
    queue, _ = fakes(adapters)
    assert queue.tasks == [TaskSpec(task_name_for(job_id, 1), job_id, due)]


def test_an_operator_replay_gives_the_sweep_a_fresh_replay_budget(
    sweeper: RecoveryService, adapters: Adapters, clock: FrozenClock
) -> None:
    job_id = seed(adapters, clock, "replayed-by-ops")
    queue, _ = fakes(adapters)
    for _ in range(3):
        clock.advance(timedelta(hours=1))
        sweeper.sweep()
        queue.finish_all()
    clock.advance(timedelta(hours=1))
    assert sweeper.sweep().failed == [job_id]
    adapters.store.update(job_id, lambda j: j.replay_failed(clock.now(), "ops"))
    clock.advance(timedelta(hours=1))
    assert sweeper.sweep().replayed == [job_id]  # generation 4, but replay 1 of this round
    job = adapters.store.get(job_id)
    assert job is not None and job.generation == 5 and job.recovery_replays == 1
