"""Batch mode's guarantees on a fake provider: one batch per job, one outcome, one event.

The worker app runs on the embedded store with a scripted provider batch grader; a tick is
the recovery sweep (`POST /tasks/recover`). Racing ticks are played by a provider that
runs another tick while it is called.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from flask.testing import FlaskClient

from services.worker.app import create_app
from shared.adapters.graders.llm import Completion, Usage
from shared.adapters.graders.provider_batch import BatchState, BatchStatus
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.errors import ProviderUnavailable
from shared.domain.events import GradingCompleted
from shared.domain.grade import GradeResult
from shared.domain.ids import job_id_for
from shared.domain.job import ATTEMPTS_EXHAUSTED, GradingRequest, Job
from shared.domain.status import JobStatus
from shared.service_layer.provider_batches import BatchPolicy
from tests.fakes import FakePublisher, FakeTaskQueue, ScriptedGrader
from tests.unit.test_worker_api import AUTH


@dataclass
class ScriptedBatches:
    """A provider's batches in memory: each ends `state` after `polls` reads."""

    provider: str = "scripted"
    state: BatchState = BatchState.COMPLETED
    polls: int = 1
    fail_submit: bool = False
    submitted: dict[str, list[str]] = field(default_factory=dict)
    reads: dict[str, int] = field(default_factory=dict)
    #: Runs inside the provider call: another tick racing this one.
    during_submit: Callable[[], object] | None = None
    during_status: Callable[[], object] | None = None

    def render(self, request: GradingRequest) -> object:
        return request.answer

    def submit(self, requests: dict[str, object], name: str) -> str:
        if self.fail_submit:
            raise ProviderUnavailable("scripted: batches unavailable")
        batch_id = f"batch-{len(self.submitted) + 1}"
        self.submitted[batch_id] = list(requests)
        if self.during_submit is not None:
            racing, self.during_submit = self.during_submit, None
            racing()
        return batch_id

    def status(self, batch_id: str) -> BatchStatus:
        self.reads[batch_id] = self.reads.get(batch_id, 0) + 1
        if self.reads[batch_id] < self.polls:
            return BatchStatus(BatchState.RUNNING)
        if self.during_status is not None:
            racing, self.during_status = self.during_status, None
            racing()
        answers: dict[str, Completion | Any] = {}
        if self.state is BatchState.COMPLETED:
            usage = Usage(100, 20, 120, 1)
            answers = {key: Completion("{}", usage) for key in self.submitted[batch_id]}
        return BatchStatus(self.state, answers)

    def result(self, request: GradingRequest, answer: object) -> GradeResult:
        assert isinstance(answer, Completion)
        return GradeResult(7, request.max_score, "batched", grader=self.provider)


def app(settings: Settings, adapters: Adapters, clock: FrozenClock, batches: Any) -> FlaskClient:
    return create_app(
        settings, adapters, ScriptedGrader(score=3), clock, batch_grader=batches
    ).test_client()


def submit(adapters: Adapters, clock: FrozenClock, key: str, lane: str = "bulk") -> str:
    job_id = job_id_for("client-a", key)
    request = GradingRequest(f"s-{key}", "an answer", "r", 10)
    adapters.store.create(Job.new(job_id, "client-a", request, "fp", clock.now(), lane=lane))
    return job_id


def deliver(client: FlaskClient, job_id: str, task: str = "t-abc") -> int:
    headers = {**AUTH, "X-CloudTasks-TaskName": task, "X-CloudTasks-TaskRetryCount": "0"}
    return client.post("/tasks/grade", json={"job_id": job_id}, headers=headers).status_code


def tick(client: FlaskClient) -> None:
    assert client.post("/tasks/recover", headers=AUTH).status_code == 200


def job(adapters: Adapters, job_id: str) -> Job:
    found = adapters.store.get(job_id)
    assert found is not None
    return found


def events(adapters: Adapters) -> list[str]:
    assert isinstance(adapters.publisher, FakePublisher)
    return [e.job_id for e in adapters.publisher.events if isinstance(e, GradingCompleted)]


def gathered(client: FlaskClient, adapters: Adapters, clock: FrozenClock, n: int) -> list[str]:
    ids = [submit(adapters, clock, f"k{i}") for i in range(n)]
    for job_id in ids:
        assert deliver(client, job_id) == 200
    clock.advance(timedelta(minutes=11))  # past the default 10-minute window
    return ids


def test_two_racing_ticks_put_each_job_into_one_batch(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    batches = ScriptedBatches(polls=2)
    client = app(settings, adapters, clock, batches)
    ids = gathered(client, adapters, clock, 3)
    batches.during_submit = lambda: tick(client)
    tick(client)
    assert [sorted(keys) for keys in batches.submitted.values()] == [sorted(ids)]
    assert len(batches.submitted) == 1
    assert {job(adapters, j).provider_batch.batch_id for j in ids} == {"batch-1"}  # type: ignore[union-attr]


def test_a_batch_read_by_two_ticks_finishes_each_job_once(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    batches = ScriptedBatches()
    client = app(settings, adapters, clock, batches)
    ids = gathered(client, adapters, clock, 2)
    tick(client)  # submitted
    batches.during_status = lambda: tick(client)
    tick(client)  # ended: the racing tick fans out first, this one finds the jobs final
    assert sorted(events(adapters)) == sorted(ids)
    for job_id in ids:
        done = job(adapters, job_id)
        assert done.status is JobStatus.SUCCEEDED and done.result is not None
        assert done.result.feedback == "batched" and done.attempts == 1


def test_a_batch_that_cannot_be_created_hands_its_jobs_back(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    batches = ScriptedBatches(fail_submit=True)
    client = app(settings, adapters, clock, batches)
    [job_id] = gathered(client, adapters, clock, 1)
    tick(client)
    back = job(adapters, job_id)
    assert back.status is JobStatus.RETRYING and back.batch_returned
    assert back.error is not None and back.error.type == "grading-provider-unavailable"
    queue = adapters.queue
    assert isinstance(queue, FakeTaskQueue)
    assert [t.name for t in queue.tasks] == [back.task_name]


def test_a_job_whose_lease_outlived_its_batch_is_replayed_and_the_late_answer_refused(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    batches = ScriptedBatches(polls=10**6)  # the provider never ends it (in time)
    client = app(settings, adapters, clock, batches)
    [job_id] = gathered(client, adapters, clock, 1)
    tick(client)
    assert job(adapters, job_id).provider_batch is not None
    clock.advance(timedelta(hours=27))  # past the completion window and its margin
    tick(client)  # the sweep finds the job without a task and a live lease: replayed
    replayed = job(adapters, job_id)
    assert replayed.generation == 1 and replayed.provider_batch is None
    batches.polls = 0  # the batch now ends: its answer is no longer this job's
    tick(client)
    assert job(adapters, job_id).status is not JobStatus.SUCCEEDED
    assert events(adapters) == []


def test_a_returned_job_on_its_last_attempt_fails_once_with_its_event(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    batches = ScriptedBatches(state=BatchState.EXPIRED)
    client = app(settings, adapters, clock, batches)
    [job_id] = gathered(client, adapters, clock, 1)
    budget = settings.budget().job_max_attempts
    adapters.store.update(job_id, lambda j: replace(j, attempts=budget))
    tick(client)
    tick(client)
    back = job(adapters, job_id)
    assert back.status is JobStatus.RETRYING and back.error is not None
    assert back.error.type == "provider-batch-expired"
    assert deliver(client, job_id, back.task_name) == 200
    failed = job(adapters, job_id)
    assert failed.status is JobStatus.FAILED and failed.error is not None
    assert failed.error.type == ATTEMPTS_EXHAUSTED and failed.attempts == budget
    assert events(adapters) == [job_id]


def test_which_jobs_may_wait() -> None:
    policy = BatchPolicy(lanes=frozenset({"bulk"}))
    base = Job.new("j", "c", GradingRequest("s", "a", "r"), "fp", FrozenClock().now())
    assert policy.accepts(replace(base, lane="bulk"))
    assert not policy.accepts(replace(base, lane="grading"))
    assert not policy.accepts(base)
    hours = replace(base, request=replace(base.request, deadline="hours"), lane="exam")
    assert policy.accepts(hours)
    regrade = replace(
        base.request, assignment_id="a1", rubric_version=2, prompt_version="p", assignment_round=1
    )
    assert policy.accepts(replace(base, request=regrade))
    assert not BatchPolicy(lanes=frozenset(), regrades=False).accepts(
        replace(base, request=regrade)
    )
    assert not policy.accepts(replace(base, lane="bulk", batch_returned=True))


def test_a_provider_that_cannot_be_asked_leaves_the_jobs_waiting_for_the_next_tick(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    batches = ScriptedBatches()
    client = app(settings, adapters, clock, batches)
    [job_id] = gathered(client, adapters, clock, 1)
    tick(client)
    asked = batches.status

    def unreachable(batch_id: str) -> BatchStatus:
        raise ProviderUnavailable("scripted: the provider could not be reached")

    batches.status = unreachable  # type: ignore[method-assign]
    tick(client)  # the sweep still answers 200
    waiting = job(adapters, job_id)
    assert waiting.waits_in_batch and waiting.provider_batch is not None
    assert waiting.provider_batch.batch_id == "batch-1"
    batches.status = asked  # type: ignore[method-assign]
    tick(client)
    assert job(adapters, job_id).status is JobStatus.SUCCEEDED
    assert events(adapters) == [job_id]
