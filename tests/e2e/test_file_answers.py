"""The local stack grades an uploaded photo with the OpenAI-compatible grader.

A student's page goes through POST /v1/uploads and a PUT to its signed URL, a job names
the upload, and the fake model server receives the image as the chat completions API
defines it: an `image_url` part carrying a base64 data URL of the exact bytes.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from localcloud.emulators import missing_reason
from localcloud.stack import EMBEDDED, GOOGLE_EMULATORS, LocalStack, StackConfig
from tests.e2e.fast_stack import fast_env
from tests.e2e.test_pipeline import REQUEST_TIMEOUT_S, api, submit, wait_final
from tests.support import files
from tests.support.fake_openai import FILE_PART_TOKENS, FakeOpenAIServer

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture(scope="module", params=[EMBEDDED, GOOGLE_EMULATORS])
def stack(
    request: pytest.FixtureRequest,
    fake: FakeOpenAIServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[LocalStack]:
    """The stack on local disk, then on the Firestore, Pub/Sub and Cloud Storage emulators."""
    if request.param == GOOGLE_EMULATORS and (
        reason := missing_reason("firestore", "pubsub", "storage")
    ):
        pytest.skip(f"the emulators are needed for this backend: {reason}")
    root = tmp_path_factory.mktemp("file-answers")
    config = StackConfig.on_free_ports(
        root / "data",
        backend=request.param,
        recover_every_s=0,
        env=fast_env(
            root,
            GRADEQ_GRADER="openai",
            GRADEQ_GRADER_BASE_URL=fake.url,
            GRADEQ_GRADER_MODEL="fake-vision",
            GRADEQ_GRADER_TIMEOUT_S="5",
            GRADEQ_GRADER_QUOTA_RPM="600",
        ),
    )
    with (root / "stack.log").open("w") as log:
        local = LocalStack(config, output=log)
        local.start()
        try:
            yield local
        finally:
            local.stop()


def _upload(stack: LocalStack, data: bytes, content_type: str) -> dict[str, Any]:
    intake = stack.config.url("intake")
    declared = {"content_type": content_type, "size": len(data)}
    answer = requests.post(
        intake + "/v1/uploads", json=declared, headers=api(stack), timeout=REQUEST_TIMEOUT_S
    )
    assert answer.status_code == 201, answer.text
    body = answer.json()
    # On the emulators, a V4 URL of Cloud Storage's own form; locally, the intake's.
    signed = "X-Goog-Signature=" if stack.config.backend == GOOGLE_EMULATORS else "signature="
    assert signed in body["upload_url"]
    put = requests.put(
        body["upload_url"], data=data, headers=body["headers"], timeout=REQUEST_TIMEOUT_S
    )
    assert put.status_code == 200, put.text
    return {"upload_id": body["upload_id"], "name": "page-1.png", **declared}


def test_an_uploaded_photo_reaches_the_model_as_an_image_url_part(
    stack: LocalStack, fake: FakeOpenAIServer
) -> None:
    photo = files.png(16, 16)
    ref = _upload(stack, photo, "image/png")
    marker = "photo-e2e-answer about mitochondria and ATP"
    marker += f" ({stack.config.backend})"
    response = submit(stack, "file-1", answer=marker, files=[ref])
    assert response.status_code == 202, response.text
    job = wait_final(stack, response.headers["Location"])
    assert job["status"] == "SUCCEEDED", job
    [served] = fake.served_for(marker)
    content = served.body["messages"][1]["content"]
    assert content[0]["type"] == "text"
    expected = "data:image/png;base64," + base64.b64encode(photo).decode()
    assert content[1] == {"type": "image_url", "image_url": {"url": expected}}
    assert job["result"]["usage"]["input_tokens"] > FILE_PART_TOKENS


def test_an_executable_dressed_as_a_photo_is_refused_before_any_job(
    stack: LocalStack, fake: FakeOpenAIServer
) -> None:
    ref = _upload(stack, files.EXECUTABLE, "image/png")
    response = submit(stack, "file-2", answer="hostile", files=[ref])
    assert response.status_code == 422
    assert response.json()["type"].endswith("/upload-mismatch")
    assert fake.served_for("hostile") == []


def test_a_pdf_over_the_limit_gets_no_upload_url(stack: LocalStack) -> None:
    declared = {"content_type": "application/pdf", "size": 10 * 1024 * 1024 + 1}
    answer = requests.post(
        stack.config.url("intake") + "/v1/uploads",
        json=declared,
        headers=api(stack),
        timeout=REQUEST_TIMEOUT_S,
    )
    assert answer.status_code == 413
    assert answer.json()["type"].endswith("/upload-too-large")
