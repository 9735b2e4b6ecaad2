"""A job handed on to a later task for lack of quota: its name, record and the sweep."""

from __future__ import annotations

from datetime import timedelta

from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.ids import task_name_for
from shared.domain.job import GradingRequest, Job
from shared.domain.status import JobStatus
from shared.ports import TaskSpec
from shared.service_layer.recovery import RecoveryService
from tests.fakes import FakeTaskQueue

LEASE = timedelta(seconds=30)
REQUEST = GradingRequest(submission_id="s", answer="a", rubric="r")


def _deferred(clock: FrozenClock, times: int = 1) -> Job:
    job = Job.new("j", "c", REQUEST, "fp", clock.now())
    for i in range(times):
        job = job.claim(f"o{i}", clock.now(), LEASE).defer(f"o{i}", clock.now())
    return job


def test_the_first_task_keeps_its_name_and_each_deferral_gets_a_new_one() -> None:
    assert task_name_for("abc", 0, 0) == task_name_for("abc", 0)
    names = {task_name_for("abc", g, d) for g in range(3) for d in range(3)}
    assert len(names) == 9


def test_a_deferral_is_an_uncounted_release_that_moves_the_task_name_on() -> None:
    clock = FrozenClock()
    job = _deferred(clock, times=2)
    assert job.status is JobStatus.RETRYING and job.attempts == 0
    assert job.lease_owner is None and job.deferrals == 2
    assert job.task_name == task_name_for("j", 0, 2)
    assert Job.from_record(job.to_record()) == job
    # Records written before deferrals existed read as never deferred.
    record = job.to_record()
    del record["deferrals"]
    assert Job.from_record(record).task_name == task_name_for("j", 0)


def test_a_new_generation_starts_its_task_names_afresh() -> None:
    clock = FrozenClock()
    replayed = _deferred(clock).replay(clock.now())
    assert replayed.deferrals == 0 and replayed.task_name == task_name_for("j", 1)


def test_the_sweep_leaves_a_job_waiting_on_its_deferred_task(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    queue = adapters.queue
    assert isinstance(queue, FakeTaskQueue)
    job = _deferred(clock)
    adapters.store.create(job)
    queue.enqueue(TaskSpec(task_name_for("j", 0), "j"))
    queue.enqueue(TaskSpec(job.task_name, "j", clock.now() + timedelta(hours=1)))
    queue.gone.add(task_name_for("j", 0))  # the deferring delivery was acknowledged
    sweeper = RecoveryService(adapters.store, queue, adapters.publisher, clock, settings.budget())
    clock.advance(timedelta(minutes=30))
    assert sweeper.sweep().replayed == []
    queue.finish_all()
    assert sweeper.sweep().replayed == ["j"]
