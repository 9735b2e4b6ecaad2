"""Both model graders against provider answers shaped as the APIs return them, over HTTP.

The official SDKs (google-genai, openai) talk to loopback servers that answer as the
Gemini API and OpenAI's reference show: thinking and reasoning tokens in the usage, the
output limit reached (MAX_TOKENS / length), an unknown model, a refused key, a disabled
API, quota answers with their wait, and a reasoning model's refused parameters.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest
from google import genai
from google.genai import types

from shared.adapters.graders.gemini import GeminiChat
from shared.adapters.graders.limiter import QuotaShare, RollingLimiter
from shared.adapters.graders.llm import ModelGrader
from shared.adapters.graders.openai_compat import OpenAICompatChat
from shared.adapters.graders.prompt import GradingPrompt
from shared.domain.errors import (
    GraderMisconfigured,
    ModelAnswerTruncated,
    ProviderRateLimited,
    ProviderRejected,
)
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest
from tests.support.fake_gemini import (
    API_KEY_INVALID,
    MODEL_NOT_FOUND,
    QUOTA_EXHAUSTED,
    SERVICE_DISABLED,
    FakeGeminiServer,
)
from tests.support.fake_openai import (
    RATE_LIMITED,
    REVOKED_KEY,
    UNKNOWN_MODEL,
    FakeOpenAIServer,
)

REQUEST = GradingRequest(
    "s-1",
    "The mitochondria produce ATP through cellular respiration.",
    ("mentions mitochondria", "names ATP", "explains glycolysis"),
    max_score=9,
)


#: SDK clients made by a test, closed after it (their sockets would outlive it).
_CLIENTS: list[genai.Client | openai.OpenAI] = []


@pytest.fixture(autouse=True)
def close_clients() -> Iterator[None]:
    yield
    while _CLIENTS:
        _CLIENTS.pop().close()


def graded(chat: GeminiChat | OpenAICompatChat, max_output_tokens: int) -> ModelGrader:
    return ModelGrader(
        chat, RollingLimiter(QuotaShare(1000, 0)), GradingPrompt.load(), max_output_tokens
    )


def grade(grader: ModelGrader) -> GradeResult:
    return grader.grade(REQUEST, attempt=1, timeout_s=30)


# --- Gemini ---------------------------------------------------------------------------


@pytest.fixture
def gemini() -> Iterator[FakeGeminiServer]:
    with FakeGeminiServer() as server:
        yield server


def gemini_chat(server: FakeGeminiServer, model: str, max_output_tokens: int, **kw: object) -> Any:
    client = genai.Client(
        api_key="AIza-contract", http_options=types.HttpOptions(base_url=server.url)
    )
    _CLIENTS.append(client)
    return GeminiChat(client, model, max_output_tokens=max_output_tokens, **kw)  # type: ignore[arg-type]


def test_gemini_thinking_is_set_explicitly_and_billed_as_output(gemini: FakeGeminiServer) -> None:
    result = grade(graded(gemini_chat(gemini, "gemini-3.5-flash", 8192), 8192))
    assert result.score == 6
    [body] = gemini.requests
    assert body["generationConfig"]["thinkingConfig"] == {"thinking_level": "LOW"}
    # Thinking tokens are output tokens: they count in usage as they are billed.
    usage = result.usage
    assert usage["output_tokens"] > 256 and usage["total_tokens"] > usage["output_tokens"]


def test_gemini_2_5_gets_a_budget_that_leaves_room_for_the_answer(
    gemini: FakeGeminiServer,
) -> None:
    # With no thinking config the model thinks as much as it likes (here 3000 tokens)
    # and a 2048-token limit leaves no room for the answer.
    result = grade(graded(gemini_chat(gemini, "gemini-2.5-flash", 2048), 2048))
    assert result.score == 6
    assert gemini.requests[0]["generationConfig"]["thinkingConfig"] == {"thinking_budget": 1024}


def test_gemini_max_tokens_is_its_own_outcome_asked_once(gemini: FakeGeminiServer) -> None:
    chat = gemini_chat(gemini, "gemini-3.5-flash", 2048, thinking_budget=2000)
    with pytest.raises(ModelAnswerTruncated) as caught:
        grade(graded(chat, 2048))
    assert len(gemini.requests) == 1
    assert "2000 of them thinking" in caught.value.detail


@pytest.mark.parametrize(
    ("refusal", "code"),
    [
        (MODEL_NOT_FOUND, "404 NOT_FOUND"),
        (API_KEY_INVALID, "400 API_KEY_INVALID"),
        (SERVICE_DISABLED, "403 SERVICE_DISABLED"),
    ],
)
def test_gemini_configuration_refusals_fail_no_job(
    gemini: FakeGeminiServer, refusal: object, code: str
) -> None:
    gemini.refusal = refusal  # type: ignore[assignment]
    chat = gemini_chat(gemini, "gemini-2.5-flash", 8192)
    with pytest.raises(GraderMisconfigured) as caught:
        grade(graded(chat, 8192))
    assert caught.value.detail == f"gemini answered HTTP {code}"
    with pytest.raises(GraderMisconfigured):
        chat.probe(timeout_s=5)
    gemini.refusal = None
    chat.probe(timeout_s=5)
    assert gemini.lookups[-1] == 200


def test_gemini_quota_passes_on_the_retry_info(gemini: FakeGeminiServer) -> None:
    gemini.refusal = QUOTA_EXHAUSTED
    with pytest.raises(ProviderRateLimited) as caught:
        grade(graded(gemini_chat(gemini, "gemini-3.5-flash", 8192), 8192))
    assert caught.value.retry_after_s == 31.0


# --- OpenAI ---------------------------------------------------------------------------


@pytest.fixture
def reasoning() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(reasoning_tokens=600) as server:
        yield server


def openai_chat(server: FakeOpenAIServer, max_output_tokens: int, **kw: object) -> Any:
    client = openai.OpenAI(base_url=server.url, api_key="sk-contract", max_retries=0)
    _CLIENTS.append(client)
    return OpenAICompatChat(client, "fake-grader", max_output_tokens=max_output_tokens, **kw)  # type: ignore[arg-type]


def test_a_reasoning_model_takes_the_request_and_bills_its_reasoning(
    reasoning: FakeOpenAIServer,
) -> None:
    result = grade(graded(openai_chat(reasoning, 4096), 4096))
    assert result.score == 6
    [served] = reasoning.served
    assert served.status == 200
    assert served.body["max_completion_tokens"] == 4096
    assert "max_tokens" not in served.body and "temperature" not in served.body
    assert result.usage["output_tokens"] > 600  # completion_tokens include reasoning


@pytest.mark.parametrize(
    ("options", "code"),
    [
        ({"token_limit_param": "max_tokens"}, "unsupported_parameter"),
        ({"temperature": 0.0}, "unsupported_value"),
    ],
)
def test_a_reasoning_models_refused_parameter_is_a_configuration_fault(
    reasoning: FakeOpenAIServer, options: dict[str, object], code: str
) -> None:
    with pytest.raises(GraderMisconfigured) as caught:
        grade(graded(openai_chat(reasoning, 4096, **options), 4096))
    assert caught.value.detail == f"openai-compatible answered HTTP 400 {code}"


def test_reasoning_that_fills_the_limit_is_its_own_outcome_asked_once(
    reasoning: FakeOpenAIServer,
) -> None:
    with pytest.raises(ModelAnswerTruncated):
        grade(graded(openai_chat(reasoning, 600), 600))
    assert len(reasoning.served) == 1


@pytest.mark.parametrize(
    ("refusal", "code"),
    [(UNKNOWN_MODEL, "404 model_not_found"), (REVOKED_KEY, "401 invalid_api_key")],
)
def test_openai_configuration_refusals_fail_no_job(
    reasoning: FakeOpenAIServer, refusal: object, code: str
) -> None:
    reasoning.refusal = refusal  # type: ignore[assignment]
    chat = openai_chat(reasoning, 4096)
    with pytest.raises(GraderMisconfigured) as caught:
        grade(graded(chat, 4096))
    assert caught.value.detail == f"openai-compatible answered HTTP {code}"
    with pytest.raises(GraderMisconfigured):
        chat.probe(timeout_s=5)
    reasoning.refusal = None
    chat.probe(timeout_s=5)
    assert reasoning.lookups[-1] == 200


def test_openai_rate_limit_passes_on_retry_after(reasoning: FakeOpenAIServer) -> None:
    reasoning.refusal = RATE_LIMITED
    with pytest.raises(ProviderRateLimited) as caught:
        grade(graded(openai_chat(reasoning, 4096), 4096))
    assert caught.value.retry_after_s == 7.0


def test_a_request_the_provider_refuses_for_itself_stays_the_jobs_fault(
    reasoning: FakeOpenAIServer,
) -> None:
    # A 400 without a configuration code (e.g. an over-long input) is this job's alone.
    with FakeOpenAIServer() as plain:
        chat = openai_chat(plain, 4096)
        answer = GradingRequest("s", "x #status=400", ("mentions x",), 1)
        with pytest.raises(ProviderRejected):
            graded(chat, 4096).grade(answer, attempt=1, timeout_s=30)
