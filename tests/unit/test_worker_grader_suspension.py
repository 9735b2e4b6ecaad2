"""A provider refusing the grader's configuration suspends grading; no job pays for it.

The grader is the real OpenAI-compatible one, against the loopback fake server made to
answer as OpenAI does for a revoked key (401) or an unknown model (404).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta

import openai
import pytest
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from services.worker.app import create_app
from shared.bootstrap import Adapters
from shared.bootstrap.graders import grader_for
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.errors import GraderMisconfigured, ProviderUnavailable
from shared.domain.ids import job_id_for
from shared.domain.job import GradingRequest, Job
from shared.domain.status import JobStatus
from shared.service_layer.grader_gate import RESUMED, SUSPENDED, GraderGate
from tests.fakes import FakeTaskQueue
from tests.support.fake_openai import REVOKED_KEY, UNKNOWN_MODEL, FakeOpenAIServer
from tests.unit.test_worker_api import deliver

ANSWER = "The mitochondria produce ATP."


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture
def client(
    server: FakeOpenAIServer,
    settings: Settings,
    adapters: Adapters,
    clock: FrozenClock,
    openai_clients: list[openai.OpenAI],
) -> FlaskClient:
    model = Settings(
        data_dir=settings.data_dir,  # the quota pool's ledger: this test's own
        grader="openai",  # type: ignore[arg-type]
        grader_base_url=server.url,
        grader_model="fake-grader",
        grader_api_key="sk-e2e-key",  # type: ignore[arg-type]
    )
    worker = create_app(settings, adapters, grader_for(model), clock).test_client()
    assert len(openai_clients) == 1  # the grader's, closed after the test
    return worker


def seed_answer(adapters: Adapters, clock: FrozenClock, key: str) -> str:
    job_id = job_id_for("client-a", key)
    request = GradingRequest("s", ANSWER, ("mentions mitochondria", "names ATP"), 2)
    adapters.store.create(Job.new(job_id, "client-a", request, "fp", clock.now()))
    return job_id


def assert_refusal(response: TestResponse) -> None:
    """A 503 whose problem document is the provider's refusal."""
    assert response.status_code == 503
    assert response.content_type == "application/problem+json"
    assert response.json is not None
    assert response.json["type"] == GraderMisconfigured("").type_uri
    assert "HTTP" not in response.json["detail"]  # the provider's words stay in the log


@pytest.mark.parametrize("refusal", [REVOKED_KEY, UNKNOWN_MODEL], ids=["401-key", "404-model"])
def test_grading_stops_without_spending_a_job_and_resumes_after_a_probe(
    refusal: object,
    server: FakeOpenAIServer,
    client: FlaskClient,
    adapters: Adapters,
    clock: FrozenClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    server.refusal = refusal  # type: ignore[assignment]
    first, second = (seed_answer(adapters, clock, k) for k in ("first", "second"))

    response = deliver(client, first)
    # The whole queue backs off until the next probe: every job would be refused alike.
    assert response.status_code == 503
    assert int(response.headers["Retry-After"]) >= 1
    assert_refusal(response)
    job = adapters.store.get(first)
    assert job is not None and job.status is JobStatus.RETRYING
    assert job.attempts == 0 and job.error is None
    [alert] = [r for r in caplog.records if r.getMessage() == SUSPENDED]
    assert alert.levelno == logging.CRITICAL and alert.__dict__["event"] == "grader_suspended"

    # While suspended, deliveries touch neither the provider nor the job.
    asked = len(server.served)
    assert_refusal(deliver(client, second))
    assert len(server.served) == asked
    job = adapters.store.get(second)
    assert job is not None and job.status is JobStatus.PENDING and job.attempts == 0

    # Fixed; once the wait is over, a probe of the provider lets grading resume.
    server.refusal = None
    clock.advance(timedelta(seconds=int(response.headers["Retry-After"])))
    assert deliver(client, second).status_code == 200
    assert deliver(client, first).status_code == 200
    assert server.lookups[-1] == 200
    for job_id in (first, second):
        job = adapters.store.get(job_id)
        assert job is not None and job.status is JobStatus.SUCCEEDED and job.attempts == 1
    assert any(r.getMessage() == RESUMED for r in caplog.records)


def test_a_refused_probe_keeps_grading_suspended_and_waits_longer(
    server: FakeOpenAIServer, client: FlaskClient, adapters: Adapters, clock: FrozenClock
) -> None:
    server.refusal = UNKNOWN_MODEL
    job_id = seed_answer(adapters, clock, "k")
    first_wait = int(deliver(client, job_id).headers["Retry-After"])
    clock.advance(timedelta(seconds=first_wait))
    response = deliver(client, job_id)
    assert response.status_code == 503 and server.lookups == [404]
    assert int(response.headers["Retry-After"]) == 2 * first_wait
    job = adapters.store.get(job_id)
    assert job is not None and job.attempts == 0 and job.status is JobStatus.RETRYING


def test_the_tasks_last_delivery_while_suspended_hands_the_job_to_a_new_task(
    server: FakeOpenAIServer,
    client: FlaskClient,
    settings: Settings,
    adapters: Adapters,
    clock: FrozenClock,
) -> None:
    server.refusal = REVOKED_KEY
    last = settings.queue_config().retry_config.max_attempts - 1
    job_id = seed_answer(adapters, clock, "k")
    # Refused on the last delivery the queue makes: the queue would delete the task.
    assert deliver(client, job_id, retry=last).status_code == 200
    queue = adapters.queue
    assert isinstance(queue, FakeTaskQueue)
    job = adapters.store.get(job_id)
    assert job is not None and job.attempts == 0 and job.deferrals == 1
    [task] = queue.tasks
    assert task.name == job.task_name and task.schedule_time is not None
    assert task.schedule_time > clock.now()
    # Already suspended, another job's last delivery is handed on without asking anyone.
    other = seed_answer(adapters, clock, "other")
    asked = len(server.served)
    assert deliver(client, other, retry=last).status_code == 200
    assert len(server.served) == asked and len(queue.tasks) == 2


def test_the_gate_probes_once_when_due_and_keeps_closed_when_the_probe_cannot_tell() -> None:
    clock = FrozenClock()
    outcomes: list[Exception | None] = [ProviderUnavailable("down"), None]
    probes: list[int] = []

    def probe() -> None:
        probes.append(1)
        outcome = outcomes.pop(0)
        if outcome is not None:
            raise outcome

    gate = GraderGate(probe, clock.now, first_wait_s=10, max_wait_s=15)
    assert gate.check() is None
    fault = GraderMisconfigured("gemini answered HTTP 404 NOT_FOUND")
    gate.trip(fault)
    assert gate.check() is fault and probes == [] and gate.retry_after_s() == 10
    clock.advance(timedelta(seconds=10))
    assert gate.check() is fault and probes == [1]  # no answer: still closed
    assert gate.retry_after_s() == 15  # doubled, capped
    clock.advance(timedelta(seconds=15))
    assert gate.check() is None and probes == [1, 1]
