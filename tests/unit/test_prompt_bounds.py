"""What one job may put in a prompt: its files' text bounded like an answer (at submit and
again when read), and its input tokens bounded before any provider request."""

from __future__ import annotations

import dataclasses

import httpx2
import openai
import pytest

from shared.adapters.graders.limiter import QuotaShare, RollingLimiter
from shared.adapters.graders.llm import ModelGrader
from shared.adapters.graders.openai_compat import OpenAICompatChat
from shared.adapters.graders.parts import FileReader
from shared.adapters.graders.prompt import GradingPrompt
from shared.adapters.graders.rubric import RubricGrader
from shared.clock import FrozenClock
from shared.domain.errors import PromptTooLarge
from shared.domain.job import GradingRequest
from shared.domain.uploads import FileRef, UploadLimits, UploadTooLarge, object_name
from shared.service_layer.uploads import UploadService
from tests.support import files
from tests.unit.test_grader_files import MemoryBlobs
from tests.unit.test_openai_grader import (
    API_KEY,
    BASE_URL,
    GOOD,
    MODEL,
    REQUEST,
    Recorder,
    answers,
    ok,
)

THREE_MIB_OF_TEXT = b"the mitochondria produce ATP. " * (3 * 1024 * 1024 // 30)
LIMITS = UploadLimits()


def _stored(blobs: MemoryBlobs, upload_id: str, data: bytes, content_type: str) -> FileRef:
    blobs.objects[object_name("c", upload_id)] = (data, content_type)
    return FileRef(upload_id, content_type, len(data))


def test_a_text_upload_over_the_jobs_text_limit_is_refused_at_submit_and_kept() -> None:
    blobs = MemoryBlobs(cloud=False)
    ref = _stored(blobs, "up_big", THREE_MIB_OF_TEXT, "text/plain")
    with pytest.raises(UploadTooLarge, match="text") as caught:
        UploadService(blobs, FrozenClock(), LIMITS).verify("c", (ref,))
    assert caught.value.extensions["limit"] == LIMITS.max_job_text_bytes == 100 * 1024
    assert object_name("c", "up_big") in blobs.objects  # sound bytes: not deleted


def test_text_files_and_archives_count_together_against_the_jobs_text_limit() -> None:
    blobs = MemoryBlobs(cloud=False)
    limits = UploadLimits(max_job_text_bytes=1000)
    text = _stored(blobs, "up_t", b"x" * 600, "text/plain")
    archive = _stored(blobs, "up_z", files.zip_of({"a.py": b"y" * 500}), "application/zip")
    service = UploadService(blobs, FrozenClock(), limits)
    assert len(service.verify("c", (text,))) == 1
    assert len(service.verify("c", (archive,))) == 1
    with pytest.raises(UploadTooLarge, match="1100 bytes of text"):
        service.verify("c", (text, archive))


def _with_file(blobs: MemoryBlobs, data: bytes) -> GradingRequest:
    ref = blobs.add("up_big", data, "text/plain")
    return dataclasses.replace(REQUEST, files=(ref,))


def _grader(
    blobs: MemoryBlobs, max_input_tokens: int = 200_000
) -> tuple[ModelGrader, Recorder, RollingLimiter]:
    recorder = Recorder(answers(ok(GOOD)))
    client = openai.OpenAI(
        base_url=BASE_URL,
        api_key=API_KEY,
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(recorder)),
    )
    chat = OpenAICompatChat(client, MODEL, max_output_tokens=512)
    limiter = RollingLimiter(QuotaShare(100, 0))
    prompt = GradingPrompt.load().with_files(FileReader(blobs, LIMITS, by_reference=False))
    grader = ModelGrader(chat, limiter, prompt, 512, max_input_tokens=max_input_tokens)
    return grader, recorder, limiter


def test_a_job_with_more_file_text_than_allowed_fails_without_a_request() -> None:
    # Accepted before the bound (or under a larger one): refused when it is read.
    blobs = MemoryBlobs(cloud=False)
    grader, recorder, limiter = _grader(blobs)
    with pytest.raises(PromptTooLarge) as caught:
        grader.grade(_with_file(blobs, THREE_MIB_OF_TEXT), attempt=1, timeout_s=30)
    assert caught.value.slug == "grading-prompt-too-large"
    assert recorder.requests == []
    assert limiter.in_window() == (0, 0)


def test_the_offline_grader_reads_no_more_file_text_than_allowed() -> None:
    blobs = MemoryBlobs(cloud=False)
    grader = RubricGrader(files=FileReader(blobs, LIMITS, by_reference=False))
    with pytest.raises(PromptTooLarge):
        grader.grade(_with_file(blobs, THREE_MIB_OF_TEXT), attempt=1, timeout_s=30)


def test_a_prompt_over_the_token_bound_fails_before_any_request() -> None:
    blobs = MemoryBlobs(cloud=False)
    grader, recorder, limiter = _grader(blobs, max_input_tokens=1_000)
    long_answer = dataclasses.replace(REQUEST, answer="word " * 1_000)  # ~1,250 tokens
    with pytest.raises(PromptTooLarge, match="1000"):
        grader.grade(long_answer, attempt=1, timeout_s=30)
    assert recorder.requests == []
    assert limiter.in_window() == (0, 0)


def test_a_prompt_within_the_bounds_is_sent() -> None:
    blobs = MemoryBlobs(cloud=False)
    grader, recorder, _ = _grader(blobs, max_input_tokens=1_000)
    result = grader.grade(_with_file(blobs, b"ATP " * 100), attempt=1, timeout_s=30)
    assert result.score == GOOD["score"]
    assert len(recorder.requests) == 1


def test_the_jobs_text_limit_is_a_setting() -> None:
    from shared.config.settings import Settings

    assert Settings(upload_max_job_text_bytes=7).upload_limits().max_job_text_bytes == 7
    assert Settings().grader_max_input_tokens == 200_000
