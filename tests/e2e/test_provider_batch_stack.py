"""The whole local stack in batch mode against the fake OpenAI Batch API.

Bulk jobs and a job allowing hours are gathered by the worker, sent as one provider batch
by the stack's recovery ticker through `/v1/files` and `/v1/batches`, and end
`SUCCEEDED` with one event each at analytics; a grading-lane job is graded at once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from localcloud.emulators import missing_reason
from localcloud.stack import EMBEDDED, GOOGLE_EMULATORS, LocalStack, StackConfig
from tests.e2e.fast_stack import FAST_QUEUE, fast_env
from tests.e2e.test_pipeline import api, received_by_analytics, submit, wait_final
from tests.support.fake_openai import FakeOpenAIServer

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


LANES = {
    "grading": {**FAST_QUEUE["grading"], "lane": {"priority": 200}},
    "bulk": {**FAST_QUEUE["grading"], "lane": {"priority": 100, "min_quota_share": 0.1}},
}


@pytest.fixture(scope="module", params=[EMBEDDED, GOOGLE_EMULATORS])
def stack(
    request: pytest.FixtureRequest,
    fake: FakeOpenAIServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[LocalStack]:
    """The embedded backend, then the Google adapters on the official emulators."""
    if request.param == GOOGLE_EMULATORS and (reason := missing_reason("firestore", "pubsub")):
        pytest.skip(f"the official emulators are needed for this backend: {reason}")
    root = tmp_path_factory.mktemp("provider-batch")
    queues = Path(root) / "lanes.json"
    queues.write_text(json.dumps(LANES))
    config = StackConfig.on_free_ports(
        root / "data",
        backend=request.param,
        recover_every_s=0.5,
        env=fast_env(
            root,
            GRADEQ_QUEUES_FILE=str(queues),
            GRADEQ_GRADER="openai",
            GRADEQ_GRADER_BASE_URL=fake.url,
            GRADEQ_GRADER_MODEL="fake-grader",
            GRADEQ_GRADER_API_KEY="sk-e2e-key",
            GRADEQ_GRADER_TIMEOUT_S="3",
            GRADEQ_GRADER_QUOTA_RPM="600",
            GRADEQ_BATCH_MODE="true",
            GRADEQ_BATCH_WINDOW_S="1",
            GRADEQ_BATCH_MAX_SIZE="100",
        ),
    )
    log = (root / "stack.log").open("w")
    local = LocalStack(config, output=log)
    local.start()
    yield local
    local.stop()
    log.close()


def test_bulk_and_hours_jobs_are_graded_in_one_provider_batch(
    stack: LocalStack, fake: FakeOpenAIServer
) -> None:
    graded_before, batches_before = fake.graded, set(fake.batches)
    locations = [
        submit(stack, "bulk-1", lane="bulk").headers["Location"],
        submit(stack, "bulk-2", lane="bulk").headers["Location"],
        submit(stack, "hours-1", deadline="hours").headers["Location"],
    ]
    at_once = submit(stack, "now-1").headers["Location"]
    assert wait_final(stack, at_once)["status"] == "SUCCEEDED"
    assert fake.graded == graded_before + 1  # the grading-lane job, one request
    jobs = [wait_final(stack, location, timeout_s=60) for location in locations]
    for job in jobs:
        assert job["status"] == "SUCCEEDED" and job["attempts"] == 1
        assert job["result"]["usage"]["requests"] == 1
        assert "waiting" not in job
        assert len(received_by_analytics(stack, job["id"])) == 1
    assert fake.graded == graded_before + 1
    batches = [b for name, b in fake.batches.items() if name not in batches_before]
    assert batches and all(b["status"] == "completed" for b in batches)
    ids = {
        json.loads(line)["custom_id"]
        for batch in batches
        for line in fake.files[batch["input_file_id"]][1].decode().splitlines()
    }
    assert ids == {job["id"] for job in jobs}
    listed = requests.get(
        stack.config.url("intake") + "/v1/grading-jobs?limit=10", headers=api(stack), timeout=10
    ).json()["jobs"]
    assert {j["id"] for j in listed} >= ids
