"""Batch mode through the worker app, against loopback fakes of the providers' batch APIs.

The worker app runs in-process on the embedded store; the provider is reached over real
HTTP through the official SDKs: OpenAI's `/v1/files` and `/v1/batches`
(tests/support/fake_openai.py) and the Gemini API's `batchGenerateContent` and
`batches/{name}` (tests/support/fake_gemini_batches.py). Deliveries gather jobs, the recovery
sweep's ticks submit and poll, and each job ends once with one event; a failed and an
expired batch hand their jobs back to one-by-one grading.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import openai
import pytest
from flask.testing import FlaskClient
from google import genai
from google.genai import types

from services.worker.app import create_app
from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.adapters.graders.gemini import GeminiChat
from shared.adapters.graders.limiter import QuotaShare, RollingLimiter
from shared.adapters.graders.llm import ChatModel, ModelGrader
from shared.adapters.graders.openai_compat import OpenAICompatChat
from shared.adapters.graders.prompt import GradingPrompt
from shared.adapters.graders.provider_batch import (
    BatchClient,
    BatchGrader,
    GeminiBatchClient,
    OpenAIBatchClient,
)
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.events import GradingCompleted
from shared.domain.ids import job_id_for
from shared.domain.job import GradingRequest, Job
from shared.domain.status import JobStatus
from tests.fakes import FakePublisher, FakeTaskQueue
from tests.support.fake_gemini_batches import FakeGeminiBatchServer
from tests.support.fake_openai import FakeOpenAIServer

PUSH_TOKEN = "local-push-secret"
AUTH = {"Authorization": f"Bearer {PUSH_TOKEN}"}
RUBRIC = ("mentions mitochondria", "mentions ATP")
GOOD = "The mitochondria produce ATP through cellular respiration."
WINDOW_S = 600


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(
        data_dir=tmp_path,
        push_token=PUSH_TOKEN,  # type: ignore[arg-type]
        grader_timeout_s=5,
        lease_s=1,
        heartbeat_s=0.3,
        batch_window_s=WINDOW_S,
        batch_max_size=3,
    )


@pytest.fixture
def adapters(settings: Settings) -> Adapters:
    db = SqliteDatabase(settings.database_path)
    return Adapters(store=SqliteJobStore(db), queue=FakeTaskQueue(), publisher=FakePublisher())


@pytest.fixture(params=["openai", "gemini"])
def provider(request: pytest.FixtureRequest) -> Iterator[FakeOpenAIServer | FakeGeminiBatchServer]:
    server: FakeOpenAIServer | FakeGeminiBatchServer
    server = FakeOpenAIServer() if request.param == "openai" else FakeGeminiBatchServer()
    with server:
        yield server


@pytest.fixture
def grader(provider: FakeOpenAIServer | FakeGeminiBatchServer) -> Iterator[BatchGrader]:
    """The provider's batch grader through its official SDK; the SDK client closed after."""
    chat: ChatModel
    client: BatchClient
    close: Callable[[], None]
    if isinstance(provider, FakeOpenAIServer):
        sdk = openai.OpenAI(base_url=provider.url, api_key="sk-test", max_retries=0)
        chat = OpenAICompatChat(sdk, "fake-grader", max_output_tokens=512)
        client = OpenAIBatchClient(sdk, chat)
        close = sdk.close
    else:
        options = types.HttpOptions(base_url=provider.url)
        gsdk = genai.Client(api_key="fake-key", http_options=options)
        chat = GeminiChat(gsdk, "gemini-2.5-flash", max_output_tokens=4096)
        client = GeminiBatchClient(gsdk, chat)
        close = gsdk.close
    model = ModelGrader(
        chat, RollingLimiter(QuotaShare(600, 0)), GradingPrompt.load(), max_output_tokens=512
    )
    yield BatchGrader(model, client)
    close()


def worker(
    settings: Settings, adapters: Adapters, clock: FrozenClock, grader: BatchGrader
) -> FlaskClient:
    one_by_one = grader.model  # for the jobs a batch hands back
    return create_app(settings, adapters, one_by_one, clock, batch_grader=grader).test_client()


def submit(adapters: Adapters, clock: FrozenClock, key: str, **request: Any) -> str:
    job_id = job_id_for("client-a", key)
    graded = GradingRequest(f"s-{key}", GOOD, RUBRIC, 10, **request)
    adapters.store.create(Job.new(job_id, "client-a", graded, "fp", clock.now(), lane="bulk"))
    return job_id


def deliver(client: FlaskClient, job_id: str, task: str = "t-abc") -> int:
    response = client.post(
        "/tasks/grade",
        json={"job_id": job_id},
        headers={**AUTH, "X-CloudTasks-TaskName": task, "X-CloudTasks-TaskRetryCount": "0"},
    )
    return response.status_code


def tick(client: FlaskClient) -> dict[str, Any]:
    response = client.post("/tasks/recover", headers=AUTH)
    assert response.status_code == 200
    return dict(response.json or {})


def job(adapters: Adapters, job_id: str) -> Job:
    found = adapters.store.get(job_id)
    assert found is not None
    return found


def events(adapters: Adapters) -> list[str]:
    assert isinstance(adapters.publisher, FakePublisher)
    return [e.job_id for e in adapters.publisher.events if isinstance(e, GradingCompleted)]


def set_outcome(server: FakeOpenAIServer | FakeGeminiBatchServer, outcome: str) -> None:
    server.batch_outcome = outcome


def test_a_full_batch_grades_each_job_once_with_one_event(
    settings: Settings,
    adapters: Adapters,
    clock: FrozenClock,
    provider: FakeOpenAIServer | FakeGeminiBatchServer,
    grader: BatchGrader,
) -> None:
    client = worker(settings, adapters, clock, grader)
    ids = [submit(adapters, clock, f"k{i}") for i in range(3)]
    for job_id in ids:
        assert deliver(client, job_id) == 200
        gathered = job(adapters, job_id)
        assert gathered.status is JobStatus.RUNNING and gathered.attempts == 1
        assert gathered.provider_batch is not None and gathered.provider_batch.batch_id is None
    # A duplicate delivery of a gathered job is acknowledged and changes nothing.
    assert deliver(client, ids[0]) == 200
    assert provider.graded == 0  # nothing was sent one request at a time

    tick(client)  # three jobs: a full batch goes at once
    assert len(provider.batches) == 1
    [batch_id] = {job(adapters, j).provider_batch.batch_id for j in ids}  # type: ignore[union-attr]
    assert batch_id is not None and not batch_id.startswith("reserved/")
    tick(client)  # the provider still works on it
    assert all(job(adapters, j).status is JobStatus.RUNNING for j in ids)

    tick(client)
    for job_id in ids:
        done = job(adapters, job_id)
        assert done.status is JobStatus.SUCCEEDED and done.attempts == 1
        assert done.result is not None and done.result.score == 10
        assert done.result.usage["requests"] == 1 and done.event_published
        assert done.result.usage["batch_requests"] == 1  # billed at the batch price
    assert sorted(events(adapters)) == sorted(ids)
    tick(client)  # the ended batch is not read again: the jobs no longer wait in it
    assert sorted(events(adapters)) == sorted(ids)
    assert provider.graded == 0


def test_a_partial_batch_waits_for_its_window(
    settings: Settings,
    adapters: Adapters,
    clock: FrozenClock,
    provider: FakeOpenAIServer | FakeGeminiBatchServer,
    grader: BatchGrader,
) -> None:
    client = worker(settings, adapters, clock, grader)
    job_id = submit(adapters, clock, "alone", deadline="hours")
    # Not a batch lane: the request's own deadline lets it wait.
    adapters.store.update(job_id, lambda j: _in_lane(j, "grading"))
    assert deliver(client, job_id) == 200
    tick(client)
    assert provider.batches == {}
    clock.advance(timedelta(seconds=WINDOW_S))
    tick(client)
    assert len(provider.batches) == 1
    for _ in range(3):
        tick(client)
    assert job(adapters, job_id).status is JobStatus.SUCCEEDED
    assert events(adapters) == [job_id]


@pytest.mark.parametrize("outcome", ["failed", "expired"])
def test_a_failed_or_expired_batch_hands_its_jobs_back_to_one_by_one_grading(
    settings: Settings,
    adapters: Adapters,
    clock: FrozenClock,
    provider: FakeOpenAIServer | FakeGeminiBatchServer,
    grader: BatchGrader,
    outcome: str,
) -> None:
    set_outcome(provider, outcome)
    provider.expired_answers = 1  # an expired batch still answered its first request
    client = worker(settings, adapters, clock, grader)
    ids = [submit(adapters, clock, f"k{i}") for i in range(3)]
    for job_id in ids:
        deliver(client, job_id)
    for _ in range(4):
        tick(client)
    returned = [job(adapters, j) for j in ids if job(adapters, j).status is JobStatus.RETRYING]
    answered = [j for j in ids if job(adapters, j).status is JobStatus.SUCCEEDED]
    assert len(answered) == (1 if outcome == "expired" else 0)
    assert len(returned) == 3 - len(answered)
    queue = adapters.queue
    assert isinstance(queue, FakeTaskQueue)
    for back in returned:
        assert back.error is not None and back.error.type.startswith("provider-batch-")
        assert back.attempts == 1 and back.batch_returned and back.provider_batch is None
        # A task of its own (a new name) carries it back to the queue, in its lane.
        [task] = [t for t in queue.tasks if t.job_id == back.id]
        assert task.name == back.task_name and task.queue == "bulk"
        assert deliver(client, back.id, task.name) == 200
        done = job(adapters, back.id)
        assert done.status is JobStatus.SUCCEEDED and done.attempts == 2
        assert done.result is not None and "batch_requests" not in done.result.usage
    assert provider.graded == len(returned)  # one request each, no second batch
    assert sorted(events(adapters)) == sorted(ids)


def _in_lane(job: Job, lane: str) -> Job:
    import dataclasses

    return dataclasses.replace(job, lane=lane)


def test_a_request_the_batch_refused_is_graded_one_by_one_and_fails_there(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    with FakeOpenAIServer() as server:
        sdk = openai.OpenAI(base_url=server.url, api_key="sk-test", max_retries=0)
        chat = OpenAICompatChat(sdk, "fake-grader", max_output_tokens=512)
        model = ModelGrader(
            chat, RollingLimiter(QuotaShare(600, 0)), GradingPrompt.load(), max_output_tokens=512
        )
        client = worker(settings, adapters, clock, BatchGrader(model, OpenAIBatchClient(sdk, chat)))
        refused = job_id_for("client-a", "refused")
        request = GradingRequest("s-refused", GOOD + " #status=400", RUBRIC, 10)
        adapters.store.create(Job.new(refused, "client-a", request, "fp", clock.now(), lane="bulk"))
        ok = submit(adapters, clock, "ok")
        for job_id in (refused, ok):
            deliver(client, job_id)
        clock.advance(timedelta(seconds=WINDOW_S))
        for _ in range(3):
            tick(client)
        assert job(adapters, ok).status is JobStatus.SUCCEEDED
        back = job(adapters, refused)
        assert back.status is JobStatus.RETRYING and back.error is not None
        assert back.error.type == "grading-provider-rejected"
        assert deliver(client, refused, back.task_name) == 200
        failed = job(adapters, refused)
        assert failed.status is JobStatus.FAILED and failed.error is not None
        assert failed.error.type == "grading-provider-rejected" and failed.attempts == 2
        assert sorted(events(adapters)) == sorted([refused, ok])
        sdk.close()
