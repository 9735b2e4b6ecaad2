"""Two worker instances grading through one provider quota pool: what one took, the other
cannot; a refused job is deferred without spending an attempt and graded once room frees."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest
from flask.testing import FlaskClient

from services.worker.app import create_app
from shared.adapters.graders.llm import ModelGrader
from shared.adapters.graders.prompt import GradingPrompt
from shared.bootstrap import Adapters
from shared.bootstrap.graders import openai_chat, quota_limiter
from shared.clock import FrozenClock
from shared.config.settings import GraderKind, Settings
from shared.domain.ids import job_id_for
from shared.domain.job import GradingRequest, Job
from shared.domain.status import JobStatus
from tests.fakes import FakeTaskQueue
from tests.support.fake_openai import FakeOpenAIServer
from tests.unit.test_worker_api import deliver

ANSWER = "Mitochondria make ATP for the cell."


class WallClock:
    """The pool's clock (wall time, shared by the instances), moved by hand."""

    def __init__(self) -> None:
        self.now = 2_000_000_000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


def instance(
    settings: Settings, adapters: Adapters, clock: FrozenClock, wall: WallClock, url: str
) -> FlaskClient:
    """One worker instance: its own grader and limiter, the deployment's pool."""
    model = settings.model_copy(
        update={
            "grader": GraderKind.OPENAI,
            "grader_base_url": url,
            "grader_model": "fake-grader",
            "grader_quota_rpm": 20,  # two requests in any 6 s (the pacing part)
            "grader_quota_headroom": 1.0,
            "worker_max_instances": 20,
        }
    )
    grader = ModelGrader(
        openai_chat(model),
        limiter=quota_limiter(model, wall, wall.sleep),
        prompt=GradingPrompt.load(model.grader_prompt_version),
        max_output_tokens=model.grader_max_output_tokens,
    )
    return create_app(settings, adapters, grader, clock).test_client()


def seed(adapters: Adapters, clock: FrozenClock, key: str) -> str:
    job_id = job_id_for("client-a", key)
    request = GradingRequest("s", ANSWER, ("mentions mitochondria", "names ATP"), 2)
    adapters.store.create(Job.new(job_id, "client-a", request, "fp", clock.now()))
    return job_id


def test_instances_share_one_pool_and_a_refused_job_waits_uncounted(
    server: FakeOpenAIServer,
    settings: Settings,
    adapters: Adapters,
    clock: FrozenClock,
    openai_clients: list[openai.OpenAI],
) -> None:
    wall = WallClock()
    a = instance(settings, adapters, clock, wall, server.url)
    b = instance(settings, adapters, clock, wall, server.url)
    assert len(openai_clients) == 2  # one per instance, closed after the test
    first, second, third = (seed(adapters, clock, k) for k in ("1", "2", "3"))

    assert deliver(a, first).status_code == 200
    assert deliver(a, second).status_code == 200
    # The pacing part's two requests are taken, by instance a: b's delivery is deferred.
    assert deliver(b, third).status_code == 200
    job = adapters.store.get(third)
    assert job is not None and job.status is not JobStatus.SUCCEEDED
    assert job.attempts == 0 and job.deferrals == 1
    queue = adapters.queue
    assert isinstance(queue, FakeTaskQueue) and len(queue.tasks) == 1
    assert len(server.served) == 2  # nothing was sent for the third job

    wall.now += 6.5  # the part's grants have left it
    assert deliver(b, third).status_code == 200
    for job_id in (first, second, third):
        done = adapters.store.get(job_id)
        assert done is not None and done.status is JobStatus.SUCCEEDED and done.attempts == 1
