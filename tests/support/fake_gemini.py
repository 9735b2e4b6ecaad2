"""A Gemini API (generateContent) on loopback, answering as Google's REST reference shows.

Point google-genai at it with `HttpOptions(base_url=server.url)`. It grades like the fake
OpenAI-compatible server (the offline keyword rules), and behaves as Gemini 2.5 and later
do: the model thinks before answering and its thinking counts against
`maxOutputTokens`; with no room left for the answer the candidate ends with finish
reason MAX_TOKENS and no parts. Thinking takes the request's `thinkingBudget`, a fixed
amount per `thinkingLevel`, or, with no thinking config, `dynamic_thinking` tokens.

`refusal` makes every request (model lookups included) answer one of the error bodies
below, shaped as the Gemini API returns them (google.rpc.Status with details).
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.fake_openai import grade_document
from tests.support.loopback import LoopbackServer

_GENERATE = re.compile(r"^/[^/]+/models/([^/:]+):generateContent$")
_MODEL = re.compile(r"^/[^/]+/models/([^/:?]+)$")
#: Thinking tokens per thinkingLevel.
LEVEL_TOKENS = {"MINIMAL": 0, "LOW": 256, "MEDIUM": 1024, "HIGH": 4096}


@dataclass(frozen=True)
class GeminiRefusal:
    status: int
    error: dict[str, Any]
    headers: tuple[tuple[str, str], ...] = ()


def _info(reason: str, **metadata: str) -> dict[str, Any]:
    return {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": reason,
        "domain": "googleapis.com",
        "metadata": {"service": "generativelanguage.googleapis.com", **metadata},
    }


MODEL_NOT_FOUND = GeminiRefusal(
    404,
    {
        "code": 404,
        "message": "models/gemini-2.5-flash is not found for API version v1beta, or is not "
        "supported for generateContent. Call ListModels to see the list of available "
        "models and their supported methods.",
        "status": "NOT_FOUND",
    },
)
API_KEY_INVALID = GeminiRefusal(
    400,
    {
        "code": 400,
        "message": "API key not valid. Please pass a valid API key.",
        "status": "INVALID_ARGUMENT",
        "details": [_info("API_KEY_INVALID")],
    },
)
SERVICE_DISABLED = GeminiRefusal(
    403,
    {
        "code": 403,
        "message": "Generative Language API has not been used in project 123 before or it is "
        "disabled. Enable it by visiting the console then retry.",
        "status": "PERMISSION_DENIED",
        "details": [_info("SERVICE_DISABLED", consumer="projects/123")],
    },
)
QUOTA_EXHAUSTED = GeminiRefusal(
    429,
    {
        "code": 429,
        "message": "You exceeded your current quota, please check your plan and billing details.",
        "status": "RESOURCE_EXHAUSTED",
        "details": [
            {
                "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                "violations": [
                    {
                        "quotaMetric": "generativelanguage.googleapis.com/"
                        "generate_content_free_tier_requests",
                        "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
                    }
                ],
            },
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "31s"},
        ],
    },
)


class FakeGeminiServer(LoopbackServer):
    """`generateContent` and `models.get` of the Gemini API on 127.0.0.1."""

    def __init__(self, dynamic_thinking: int = 3000) -> None:
        self.dynamic_thinking = dynamic_thinking
        self.refusal: GeminiRefusal | None = None
        self.requests: list[dict[str, Any]] = []
        self.lookups: list[int] = []
        self._lock = threading.Lock()
        super().__init__(self._handler_class())

    @property
    def url(self) -> str:
        return self.base_url

    def generate(self, model: str, body: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
        with self._lock:
            self.requests.append(body)
        if self.refusal is not None:
            return self._refused()
        config = body.get("generationConfig") or {}
        thinking = self._thinking(config.get("thinkingConfig") or config.get("thinking_config"))
        limit = config.get("maxOutputTokens")
        document = json.loads(body["contents"][-1]["parts"][0]["text"])
        text = json.dumps(grade_document(document))
        answer = len(text) // 4
        prompt = len(json.dumps(body)) // 4
        candidate: dict[str, Any] = {
            "content": {"parts": [{"text": text}], "role": "model"},
            "finishReason": "STOP",
            "index": 0,
        }
        if limit is not None and thinking + answer > limit:
            thinking = min(thinking, limit)
            answer = 0
            candidate = {"content": {"role": "model"}, "finishReason": "MAX_TOKENS", "index": 0}
        usage: dict[str, Any] = {
            "promptTokenCount": prompt,
            "totalTokenCount": prompt + thinking + answer,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}],
        }
        if answer:
            usage["candidatesTokenCount"] = answer
        if thinking:
            usage["thoughtsTokenCount"] = thinking
        return (
            200,
            {},
            {
                "candidates": [candidate],
                "usageMetadata": usage,
                "modelVersion": model,
                "responseId": "fake-response-id",
            },
        )

    def lookup(self, model: str) -> tuple[int, dict[str, str], Any]:
        refused = self.refusal is not None
        with self._lock:
            self.lookups.append(self.refusal.status if self.refusal else 200)
        if refused:
            return self._refused()
        return (
            200,
            {},
            {
                "name": f"models/{model}",
                "version": "001",
                "displayName": model,
                "inputTokenLimit": 1048576,
                "outputTokenLimit": 65536,
                "supportedGenerationMethods": ["generateContent", "countTokens"],
                "thinking": True,
            },
        )

    def _refused(self) -> tuple[int, dict[str, str], Any]:
        assert self.refusal is not None
        return self.refusal.status, dict(self.refusal.headers), {"error": self.refusal.error}

    def _thinking(self, config: dict[str, Any] | None) -> int:
        if not config:
            return self.dynamic_thinking
        budget = config.get("thinkingBudget", config.get("thinking_budget"))
        level = config.get("thinkingLevel", config.get("thinking_level"))
        if budget is not None and level is not None:
            raise ValueError("thinkingBudget and thinkingLevel together are refused")
        if budget is not None:
            return self.dynamic_thinking if budget == -1 else int(budget)
        return LEVEL_TOKENS[str(level)]

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length))
                match = _GENERATE.match(self.path.split("?")[0])
                if match is None:
                    self._send(404, {}, {"error": MODEL_NOT_FOUND.error})
                    return
                try:
                    self._send(*server.generate(match.group(1), body))
                except ValueError as exc:
                    error = {"code": 400, "message": str(exc), "status": "INVALID_ARGUMENT"}
                    self._send(400, {}, {"error": error})

            def do_GET(self) -> None:
                match = _MODEL.match(self.path.split("?")[0])
                if match is None:
                    self._send(404, {}, {"error": MODEL_NOT_FOUND.error})
                    return
                self._send(*server.lookup(match.group(1)))

            def _send(self, status: int, headers: dict[str, str], payload: Any) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Type", "application/json; charset=UTF-8")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler
