"""The worker with the model graders: quota throttling, malformed answers, result and event."""

from __future__ import annotations

import json
from datetime import timedelta

import httpx2
import openai

from services.worker.app import create_app
from shared.adapters.graders.limiter import QuotaShare, RollingLimiter
from shared.adapters.graders.llm import ModelGrader
from shared.adapters.graders.openai_compat import OpenAICompatChat
from shared.adapters.graders.prompt import GradingPrompt
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.errors import (
    MalformedModelAnswer,
    ProviderQuotaExhausted,
    ProviderRateLimited,
)
from shared.domain.grade import GradeResult
from shared.domain.ids import task_name_for
from shared.domain.job import Job, JobError
from shared.domain.status import JobStatus
from tests.fakes import FakeTaskQueue, ScriptedGrader
from tests.unit.test_openai_grader import GOOD, REQUEST, answers, ok
from tests.unit.test_worker_api import deliver, publisher, seed


def model_grader(handler: httpx2.MockTransport, share: QuotaShare) -> ModelGrader:
    client = openai.OpenAI(
        base_url="http://127.0.0.1:9/v1",
        api_key="sk-test",
        max_retries=0,
        http_client=httpx2.Client(transport=handler),
    )
    return ModelGrader(
        OpenAICompatChat(client, "grader-model", max_output_tokens=256),
        RollingLimiter(share),
        GradingPrompt.load(),
        max_output_tokens=256,
    )


def queue(adapters: Adapters) -> FakeTaskQueue:
    assert isinstance(adapters.queue, FakeTaskQueue)
    return adapters.queue


def test_no_quota_hands_the_job_to_a_task_due_at_retry_after_and_costs_no_attempt(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    grader = ScriptedGrader(ProviderQuotaExhausted("no room", retry_after_s=17.2))
    client = create_app(settings, adapters, grader, clock).test_client()
    job_id = seed(adapters, clock)
    response = deliver(client, job_id)
    # Acknowledged: the queue's attempts of this task are not spent waiting for quota.
    assert response.status_code == 200
    job = adapters.store.get(job_id)
    assert job is not None and job.status is JobStatus.RETRYING
    assert job.attempts == 0 and job.started_at is None and job.lease_owner is None
    assert job.error is None and job.deferrals == 1
    [task] = queue(adapters).tasks
    assert task.name == job.task_name == task_name_for(job_id, 0, 1)
    assert task.job_id == job_id
    assert task.schedule_time == clock.now() + timedelta(seconds=17.2)
    assert publisher(adapters).events == []
    # The new task's delivery, with room, is the job's first attempt.
    response = deliver(client, job_id, 0, **{"X-CloudTasks-TaskName": task.name})
    assert response.status_code == 200
    job = adapters.store.get(job_id)
    assert job is not None and job.status is JobStatus.SUCCEEDED and job.attempts == 1


def test_no_quota_and_no_queue_to_defer_to_answers_429_with_retry_after(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    queue(adapters).available = False
    grader = ScriptedGrader(ProviderQuotaExhausted("no room", retry_after_s=17.2))
    client = create_app(settings, adapters, grader, clock).test_client()
    job_id = seed(adapters, clock)
    first = {"X-CloudTasks-TaskName": task_name_for(job_id, 0)}
    response = deliver(client, job_id, 0, **first)
    # The queue retries this very task, backing off as the quota asks.
    assert response.status_code == 429
    assert response.headers["Retry-After"] == "17"
    job = adapters.store.get(job_id)
    assert job is not None and job.status is JobStatus.RETRYING and job.attempts == 0
    queue(adapters).available = True
    # The task it was to be deferred to does not exist: this task still carries the job.
    assert deliver(client, job_id, 1, **first).status_code == 200
    assert queue(adapters).asked == [task_name_for(job_id, 0, 1)]
    job = adapters.store.get(job_id)
    assert job is not None and job.status is JobStatus.SUCCEEDED and job.attempts == 1


def test_a_deferring_delivery_delivered_again_starts_no_second_task(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    grader = ScriptedGrader(ProviderQuotaExhausted("no room", retry_after_s=30))
    client = create_app(settings, adapters, grader, clock).test_client()
    job_id = seed(adapters, clock)
    first = {"X-CloudTasks-TaskName": task_name_for(job_id, 0)}
    assert deliver(client, job_id, 0, **first).status_code == 200
    # Its acknowledgement was lost: the queue delivers the same task again.
    assert deliver(client, job_id, retry=1, **first).status_code == 200
    assert len(queue(adapters).tasks) == 1
    job = adapters.store.get(job_id)
    assert job is not None and job.deferrals == 1 and grader.calls == 1


def test_a_provider_429_is_quota_too_deferred_without_spending_an_attempt(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    grader = ScriptedGrader(ProviderRateLimited("gemini answered HTTP 429", retry_after_s=5))
    client = create_app(settings, adapters, grader, clock).test_client()
    job_id = seed(adapters, clock)
    assert deliver(client, job_id).status_code == 200
    job = adapters.store.get(job_id)
    assert job is not None and job.attempts == 0 and job.deferrals == 1
    assert queue(adapters).tasks[0].schedule_time == clock.now() + timedelta(seconds=5)


def test_release_gives_back_a_later_attempt_too() -> None:
    now = FrozenClock().now()
    job = Job.new("j", "c", REQUEST, "fp", now).claim("a", now, timedelta(seconds=60))
    job = job.retry_later("a", JobError("grading-rate-limited", "429"), now)
    claimed = job.claim("b", now + timedelta(seconds=5), timedelta(seconds=60))
    released = claimed.release("b", now + timedelta(seconds=6))
    assert released.status is JobStatus.RETRYING and released.attempts == 1
    assert released.started_at == now and released.error == job.error


def test_a_malformed_answer_on_the_last_attempt_fails_the_job_with_its_type(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    last = settings.queue_config().retry_config.max_attempts - 1
    grader = ScriptedGrader(MalformedModelAnswer("unusable 3 times"))
    client = create_app(settings, adapters, grader, clock).test_client()
    job_id = seed(adapters, clock)
    assert deliver(client, job_id, retry=last).status_code == 200
    job = adapters.store.get(job_id)
    assert job is not None and job.status is JobStatus.FAILED
    assert job.error is not None and job.error.type == "grading-malformed-answer"
    [event] = publisher(adapters).completions()
    assert event.error == {"type": "grading-malformed-answer", "message": "unusable 3 times"}


def test_a_malformed_answer_before_the_last_attempt_is_retried(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    grader = ScriptedGrader(MalformedModelAnswer("unusable", retry_after_s=None))
    client = create_app(settings, adapters, grader, clock).test_client()
    job_id = seed(adapters, clock)
    assert deliver(client, job_id).status_code == 500
    job = adapters.store.get(job_id)
    assert job is not None and job.status is JobStatus.RETRYING
    assert job.error is not None and job.error.type == "grading-malformed-answer"


def test_the_result_and_event_carry_model_prompt_version_and_usage(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    grader = model_grader(httpx2.MockTransport(answers(ok(GOOD))), QuotaShare(1, 0))
    client = create_app(settings, adapters, grader, clock).test_client()
    first = adapters.store.create(Job.new("job-1", "client-a", REQUEST, "fp", clock.now()))[0].id
    assert deliver(client, first).status_code == 200
    job = adapters.store.get(first)
    assert job is not None and job.result is not None
    assert job.result.to_dict() | {"criteria": []} == {
        "score": 6.0,
        "max_score": 9.0,
        "feedback": GOOD["feedback"],
        "criteria": [],
        "grader": "openai-compatible",
        "model": "grader-model",
        "prompt_version": "grading-v1",
        "usage": {
            "input_tokens": 100,
            "cached_input_tokens": 0,
            "output_tokens": 50,
            "total_tokens": 150,
            "requests": 1,
        },
        "confidence": 0.8,
    }
    [event] = publisher(adapters).completions()
    assert event.model == "grader-model"
    assert event.usage == {
        "input_tokens": 100,
        "cached_input_tokens": 0,
        "output_tokens": 50,
        "total_tokens": 150,
        "requests": 1,
    }
    # The share (1 request a minute) is spent: the next job waits on a later task.
    second = seed(adapters, clock, key="second")
    assert deliver(client, second).status_code == 200
    job = adapters.store.get(second)
    assert job is not None and job.attempts == 0 and job.deferrals == 1
    [task] = queue(adapters).tasks
    assert task.schedule_time is not None and task.schedule_time > clock.now()


def test_an_old_result_without_model_fields_still_loads() -> None:
    record = {"score": 3, "max_score": 5, "feedback": "ok", "criteria": [], "grader": "x"}
    result = GradeResult.from_dict(json.loads(json.dumps(record)))
    assert (result.model, result.prompt_version, result.usage) == ("", "", {})


def test_a_deferral_waits_at_least_a_second(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    grader = ScriptedGrader(ProviderQuotaExhausted("no room", retry_after_s=0.05))
    client = create_app(settings, adapters, grader, clock).test_client()
    job_id = seed(adapters, clock)
    assert deliver(client, job_id).status_code == 200
    [task] = queue(adapters).tasks
    assert task.schedule_time == clock.now() + timedelta(seconds=1)
