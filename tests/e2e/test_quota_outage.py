"""A provider quota outage longer than the queue's retry window, across the local stack.

The queue here gives a task 3 deliveries; the provider (the fake OpenAI-compatible
server) answers 429 with `Retry-After: 1` to the first 6 requests for the job's answer.
Retried as a task, the job would be deleted by the queue (or failed) long before the
quota came back; deferred to new tasks, it is graded on its first attempt.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from localcloud.stack import EMBEDDED, LocalStack, StackConfig
from tests.e2e.fast_stack import FAST_QUEUE, fast_env
from tests.e2e.test_pipeline import job_lines, submit, wait_final
from tests.support.fake_openai import FakeOpenAIServer

pytestmark = pytest.mark.e2e

ANSWER = "The mitochondria produce ATP through cellular respiration."
MAX_ATTEMPTS = 3
OUTAGE = 2 * MAX_ATTEMPTS


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture(scope="module")
def stack(fake: FakeOpenAIServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    root = tmp_path_factory.mktemp("quota-outage")
    short = json.loads(json.dumps(FAST_QUEUE))
    short["grading"]["retry_config"]["max_attempts"] = MAX_ATTEMPTS
    queues = root / "short-queues.json"
    queues.write_text(json.dumps(short))
    config = StackConfig.on_free_ports(
        root / "data",
        backend=EMBEDDED,
        recover_every_s=0,
        env=fast_env(
            root,
            GRADEQ_QUEUES_FILE=str(queues),
            GRADEQ_GRADER="openai",
            GRADEQ_GRADER_BASE_URL=fake.url,
            GRADEQ_GRADER_MODEL="fake-grader",
            GRADEQ_GRADER_API_KEY="sk-e2e-key",
            GRADEQ_GRADER_TIMEOUT_S="3",
            GRADEQ_GRADER_QUOTA_RPM="600",
        ),
    )
    log = (root / "stack.log").open("w")
    local = LocalStack(config, output=log)
    local.start()
    yield local
    local.stop()
    log.close()


def test_a_quota_outage_longer_than_the_retry_window_grades_the_job_on_its_first_attempt(
    stack: LocalStack, fake: FakeOpenAIServer
) -> None:
    marker = f"#429x{OUTAGE}"
    response = submit(stack, "quota-outage", answer=f"{ANSWER} {marker}")
    job = wait_final(stack, response.headers["Location"], timeout_s=90)
    assert job["status"] == "SUCCEEDED" and job["attempts"] == 1
    assert [s.status for s in fake.served_for(marker)] == [429] * OUTAGE + [200]
    deferred = job_lines(
        stack, "worker", job["id"], "no provider quota; job deferred to a new task"
    )
    assert [line["deferrals"] for line in deferred] == list(range(1, OUTAGE + 1))
