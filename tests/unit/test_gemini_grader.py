"""The Gemini grader through google-genai with its HTTP client's transport mocked (no network)."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest
from google import genai
from google.genai import types
from google.oauth2.credentials import Credentials

from shared.adapters.graders.gemini import GeminiChat
from shared.adapters.graders.limiter import QuotaShare, RollingLimiter
from shared.adapters.graders.llm import ModelGrader
from shared.adapters.graders.prompt import GradingPrompt
from shared.domain.errors import (
    GraderMisconfigured,
    GradingError,
    GradingRefused,
    GradingTimeout,
    ModelAnswerTruncated,
    ProviderRateLimited,
    ProviderRejected,
    ProviderUnavailable,
)
from shared.domain.job import GradingRequest
from tests.unit.test_openai_grader import GOOD, INJECTION, REQUEST, Handler, Recorder, answers

MODEL = "gemini-2.5-flash"
API_KEY = "AIza-test-secret"
VERTEX_URL = (
    "https://europe-west1-aiplatform.googleapis.com/v1beta1/projects/demo-project"
    f"/locations/europe-west1/publishers/google/models/{MODEL}:generateContent"
)


def generated(text: str, finish_reason: str = "STOP", **extra: Any) -> dict[str, Any]:
    return {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": text}]},
                "finishReason": finish_reason,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 120,
            "candidatesTokenCount": 40,
            "thoughtsTokenCount": 10,
            "totalTokenCount": 170,
        },
        **extra,
    }


def ok(content: Any) -> httpx2.Response:
    text = content if isinstance(content, str) else json.dumps(content)
    return httpx2.Response(200, json=generated(text))


def build(handler: Handler, *, vertex: bool = True) -> tuple[ModelGrader, Recorder]:
    recorder = Recorder(handler)
    http_options = types.HttpOptions(
        httpx_client=httpx2.Client(transport=httpx2.MockTransport(recorder))
    )
    if vertex:
        client = genai.Client(
            vertexai=True,
            project="demo-project",
            location="europe-west1",
            credentials=Credentials(token="adc-access-token"),  # type: ignore[no-untyped-call]
            http_options=http_options,
        )
    else:
        client = genai.Client(api_key=API_KEY, http_options=http_options)
    chat = GeminiChat(client, MODEL, max_output_tokens=1024)
    grader = ModelGrader(
        chat, RollingLimiter(QuotaShare(100, 0)), GradingPrompt.load(), max_output_tokens=1024
    )
    return grader, recorder


def grade(grader: ModelGrader, request: GradingRequest = REQUEST) -> Any:
    return grader.grade(request, attempt=1, timeout_s=30)


def test_the_exact_request_sent_to_vertex_ai_with_adc() -> None:
    grader, recorder = build(answers(ok(GOOD)))
    grade(grader)
    [request] = recorder.requests
    assert request.method == "POST"
    assert str(request.url) == VERTEX_URL
    assert request.headers["Authorization"] == "Bearer adc-access-token"
    body = json.loads(request.content)
    rendered = GradingPrompt.load().render(REQUEST)
    assert body == {
        "contents": [{"role": "user", "parts": [{"text": rendered.user}]}],
        "systemInstruction": {"role": "user", "parts": [{"text": rendered.system}]},
        "generationConfig": {
            "responseMimeType": "application/json",
            "responseJsonSchema": rendered.schema,
            "maxOutputTokens": 1024,
            # Thinking counts against maxOutputTokens: a 2.x model gets a budget.
            # (the SDK sends this object's fields as named in Python; the API reads both)
            "thinkingConfig": {"thinking_budget": 1024},
        },
    }


def test_gemini_3_gets_a_thinking_level_and_a_configured_temperature() -> None:
    recorder = Recorder(answers(ok(GOOD)))
    client = genai.Client(
        api_key=API_KEY,
        http_options=types.HttpOptions(
            httpx_client=httpx2.Client(transport=httpx2.MockTransport(recorder))
        ),
    )
    chat = GeminiChat(
        client, "gemini-3.5-flash", max_output_tokens=8192, temperature=0.2, thinking_level="low"
    )
    chat.complete(GradingPrompt.load().render(REQUEST), timeout_s=30)
    config = json.loads(recorder.requests[0].content)["generationConfig"]
    assert config["thinkingConfig"] == {"thinking_level": "LOW"}
    assert config["temperature"] == 0.2 and config["maxOutputTokens"] == 8192
    assert "candidateCount" not in config


def test_the_gemini_api_with_an_api_key() -> None:
    grader, recorder = build(answers(ok(GOOD)), vertex=False)
    grade(grader)
    [request] = recorder.requests
    assert str(request.url) == (
        f"https://generativelanguage.googleapis.com/v1/models/{MODEL}:generateContent"
    )
    assert request.headers["x-goog-api-key"] == API_KEY
    assert "Authorization" not in request.headers
    assert API_KEY not in str(request.url)


def test_a_good_answer_is_parsed_with_usage() -> None:
    grader, _ = build(answers(ok(GOOD)))
    result = grade(grader)
    assert result.score == 6
    assert [c["verdict"] for c in result.criteria] == ["met", "met", "not_met"]
    assert (result.grader, result.model, result.prompt_version) == ("gemini", MODEL, "grading-v1")
    assert result.usage == {
        "input_tokens": 120,
        "cached_input_tokens": 0,
        "output_tokens": 50,  # thinking tokens are billed as output
        "total_tokens": 170,
        "requests": 1,
    }


def status(code: int, name: str, headers: dict[str, str] | None = None, **error: Any) -> Any:
    body = {"error": {"code": code, "message": "echo STUDENT-TEXT", "status": name, **error}}
    return httpx2.Response(code, headers=headers or {}, json=body)


RETRY_INFO = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "31s"}]


@pytest.mark.parametrize(
    ("reply", "kind", "retry_after"),
    [
        (status(429, "RESOURCE_EXHAUSTED", {"Retry-After": "12"}), ProviderRateLimited, 12.0),
        (status(429, "RESOURCE_EXHAUSTED", details=RETRY_INFO), ProviderRateLimited, 31.0),
        (status(429, "RESOURCE_EXHAUSTED"), ProviderRateLimited, None),
        (status(503, "UNAVAILABLE", {"Retry-After": "5"}), ProviderUnavailable, 5.0),
        (status(500, "INTERNAL"), ProviderUnavailable, None),
        (status(504, "DEADLINE_EXCEEDED"), ProviderUnavailable, None),
        (status(400, "INVALID_ARGUMENT"), ProviderRejected, None),
        (status(401, "UNAUTHENTICATED"), GraderMisconfigured, None),
        (status(403, "PERMISSION_DENIED"), GraderMisconfigured, None),
        (status(404, "NOT_FOUND"), GraderMisconfigured, None),
        (httpx2.ReadTimeout("slow"), GradingTimeout, None),
        (httpx2.ConnectError("refused"), ProviderUnavailable, None),
    ],
)
def test_every_error_class(
    reply: httpx2.Response | Exception, kind: type[GradingError], retry_after: float | None
) -> None:
    grader, recorder = build(answers(reply))
    with pytest.raises(kind) as caught:
        grade(grader)
    assert getattr(caught.value, "retry_after_s", None) == retry_after
    assert "STUDENT-TEXT" not in caught.value.detail
    assert len(recorder.requests) == 1  # the SDK does not retry on its own


def test_permission_denied_names_the_status() -> None:
    grader, _ = build(answers(status(403, "PERMISSION_DENIED")))
    with pytest.raises(GraderMisconfigured) as caught:
        grade(grader)
    assert caught.value.detail == "gemini answered HTTP 403 PERMISSION_DENIED"


@pytest.mark.parametrize(
    "reply",
    [
        generated("", finish_reason="SAFETY"),
        generated("", finish_reason="PROHIBITED_CONTENT"),
        {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 9}},
    ],
)
def test_safety_blocks_are_permanent(reply: dict[str, Any]) -> None:
    grader, _ = build(answers(httpx2.Response(200, json=reply)))
    with pytest.raises(GradingRefused):
        grade(grader)


def test_a_truncated_answer_is_its_own_outcome_and_not_asked_again() -> None:
    truncated = httpx2.Response(200, json=generated('{"criteria": [', finish_reason="MAX_TOKENS"))
    grader, recorder = build(answers(truncated))
    with pytest.raises(ModelAnswerTruncated) as caught:
        grade(grader)
    # Asked again with the same limit it would end the same way, at the same cost.
    assert len(recorder.requests) == 1
    assert "max_output_tokens (1024)" in caught.value.detail
    assert "10 of them thinking" in caught.value.detail


def test_the_injected_answer_stays_in_the_data() -> None:
    grader, recorder = build(
        answers(
            ok(
                {
                    **GOOD,
                    "score": 0,
                    "criteria": [{**c, "verdict": "not_met"} for c in GOOD["criteria"]],
                }
            )
        )
    )
    result = grade(grader, GradingRequest("s2", INJECTION, REQUEST.rubric, max_score=9))
    assert result.score == 0
    body = json.loads(recorder.requests[0].content)
    assert body["systemInstruction"]["parts"][0]["text"] == GradingPrompt.load().system
    assert json.loads(body["contents"][0]["parts"][0]["text"])["answer"] == INJECTION
