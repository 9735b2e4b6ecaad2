"""A small OpenAI-compatible chat completions server on loopback, for the model graders.

It acts as a deterministic model: it reads the grading document from the user message
(the rubric and the answer, as data), grades it with the offline keyword rules, and
answers with the structured JSON the response schema asks for, with token usage.

Markers in an answer script the server's behaviour for requests carrying that answer,
so concurrent jobs can each ask for their own failure:
- `#429xN`: the first N requests answer 429 with `Retry-After: 1`.
- `#500xN`: the first N requests answer 500.
- `#status=S`: every request answers status S (e.g. 400).
- `#slowxN=S`: the first N requests take S seconds before answering.
- `#malformedxN`: the first N requests answer text that is not JSON.

Server-wide settings act like the provider's side of a deployment:
- `refusal`: every request (the model lookup included) answers this error, e.g.
  `REVOKED_KEY` or `UNKNOWN_MODEL`, shaped as OpenAI's API reference shows them.
- `reasoning_tokens`: the model reasons before answering, as OpenAI's reasoning models
  do: it refuses `max_tokens` and any `temperature` but 1 (400), counts its reasoning in
  `completion_tokens` (`completion_tokens_details.reasoning_tokens`), and ends with
  `finish_reason` "length" and no content when `max_completion_tokens` leaves no room.
- `quota`: the provider's quota (`tests/support/provider_quota.py`): a request past it
  answers 429 with `Retry-After`; `latency_s`: how long every answer takes.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from shared.adapters.graders.rubric import RubricGrader
from shared.domain.job import GradingRequest
from tests.support.loopback import LoopbackServer
from tests.support.provider_quota import ProviderQuota

_MARKER = re.compile(r"#(429|500|malformed|slow)x(\d+)(?:=(\d+(?:\.\d+)?))?|#status=(\d{3})")


@dataclass(frozen=True)
class Refusal:
    """An error answer: status, headers and the API's error object."""

    status: int
    error: dict[str, Any]
    headers: tuple[tuple[str, str], ...] = ()


def _api_error(message: str, kind: str, code: str | None, param: str | None = None) -> Any:
    return {"message": message, "type": kind, "param": param, "code": code}


REVOKED_KEY = Refusal(
    401,
    _api_error(
        "Incorrect API key provided: sk-e2e***. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
        "invalid_request_error",
        "invalid_api_key",
    ),
)
UNKNOWN_MODEL = Refusal(
    404,
    _api_error(
        "The model `fake-grader` does not exist or you do not have access to it.",
        "invalid_request_error",
        "model_not_found",
    ),
)
RATE_LIMITED = Refusal(
    429,
    _api_error(
        "Rate limit reached for fake-grader on requests per min (RPM): Limit 3, Used 3.",
        "requests",
        "rate_limit_exceeded",
    ),
    (("Retry-After", "7"), ("x-ratelimit-reset-requests", "7s")),
)
MAX_TOKENS_REFUSED = Refusal(
    400,
    _api_error(
        "Unsupported parameter: 'max_tokens' is not supported with this model. "
        "Use 'max_completion_tokens' instead.",
        "invalid_request_error",
        "unsupported_parameter",
        "max_tokens",
    ),
)
TEMPERATURE_REFUSED = Refusal(
    400,
    _api_error(
        "Unsupported value: 'temperature' does not support 0.0 with this model. Only the "
        "default (1) value is supported.",
        "invalid_request_error",
        "unsupported_value",
        "temperature",
    ),
)


@dataclass(frozen=True)
class Served:
    """One request the server answered: when, what status, for which answer."""

    at: float
    status: int
    answer: str
    body: dict[str, Any]


def grade_document(document: dict[str, Any]) -> dict[str, Any]:
    """The structured answer a careful model would give, by the keyword rules."""
    texts = [c["text"] for c in document["criteria"]]
    request = GradingRequest("fake", document["answer"], tuple(texts), document["max_score"])
    graded = RubricGrader(simulate=False).grade(request, attempt=1, timeout_s=60)
    return {
        "criteria": [
            {
                "id": c["id"],
                "verdict": "met" if checked["met"] else "not_met",
                "justification": "Mentions " + ", ".join(checked["matched"])
                if checked["matched"]
                else "The answer does not address this.",
            }
            for c, checked in zip(document["criteria"], graded.criteria, strict=True)
        ],
        "score": graded.score,
        "feedback": graded.feedback,
        "confidence": graded.confidence,
    }


class FakeOpenAIServer(LoopbackServer):
    """`/v1/chat/completions` on 127.0.0.1; `url` is the base URL for the openai SDK."""

    def __init__(self, reasoning_tokens: int = 0) -> None:
        self.refusal: Refusal | None = None
        self.reasoning_tokens = reasoning_tokens
        #: The model lookups (GET /v1/models/{id}) answered, by status.
        self.lookups: list[int] = []
        self.served: list[Served] = []
        self.quota: ProviderQuota | None = None
        self.latency_s = 0.0
        self._seen: Counter[str] = Counter()
        self._lock = threading.Lock()
        super().__init__(self._handler_class())

    @property
    def url(self) -> str:
        return self.base_url + "/v1"

    def served_for(self, marker: str) -> list[Served]:
        """The requests whose answer contains `marker`, in order."""
        with self._lock:
            return [s for s in self.served if marker in s.answer]

    def lookup(self, model: str) -> tuple[int, dict[str, str], bytes]:
        """`GET /v1/models/{model}`: the model object, or the server-wide refusal."""
        refusal = self.refusal
        with self._lock:
            self.lookups.append(refusal.status if refusal else 200)
        if refusal is not None:
            return (
                refusal.status,
                dict(refusal.headers),
                json.dumps({"error": refusal.error}).encode(),
            )
        found = {"id": model, "object": "model", "created": 1686935002, "owned_by": "system"}
        return 200, {}, json.dumps(found).encode()

    def respond(self, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes, float]:
        """Status, headers, body and delay for one chat completions request."""
        document = json.loads(_text_of(body["messages"][-1]["content"]))
        answer = document["answer"]
        refusal = self.refusal or self._refuse_parameters(body)
        if refusal is not None:
            payload = {"error": refusal.error}
            return self._log(refusal.status, answer, body, dict(refusal.headers), payload, 0)
        with self._lock:
            self._seen[answer] += 1
            n = self._seen[answer]
        delay = 0.0
        for match in _MARKER.finditer(answer):
            kind, times, seconds, status = match.groups()
            if status:
                return self._log(int(status), answer, body, {}, _error(int(status)), 0)
            if n > int(times):
                continue
            if kind == "429":
                return self._log(429, answer, body, {"Retry-After": "1"}, _error(429), 0)
            if kind == "500":
                return self._log(500, answer, body, {}, _error(500), 0)
            if kind == "slow":
                delay = float(seconds or 1)
            if kind == "malformed":
                return self._log(200, answer, body, {}, _completion(body, "Sure! The score"), 0)
        content = json.dumps(grade_document(document))
        reply = _completion(body, content, self.reasoning_tokens)
        if self.quota is not None:
            wait = self.quota.admit(time.monotonic(), reply["usage"]["total_tokens"])
            if wait is not None:
                after = {"Retry-After": str(max(1, math.ceil(wait)))}
                return self._log(429, answer, body, after, _error(429), 0)
        return self._log(200, answer, body, {}, reply, max(delay, self.latency_s))

    def _refuse_parameters(self, body: dict[str, Any]) -> Refusal | None:
        if not self.reasoning_tokens:
            return None
        if "max_tokens" in body:
            return MAX_TOKENS_REFUSED
        if body.get("temperature", 1) != 1:
            return TEMPERATURE_REFUSED
        return None

    def _log(
        self,
        status: int,
        answer: str,
        body: dict[str, Any],
        headers: dict[str, str],
        payload: dict[str, Any],
        delay: float,
    ) -> tuple[int, dict[str, str], bytes, float]:
        with self._lock:
            self.served.append(Served(time.monotonic(), status, answer, body))
        return status, headers, json.dumps(payload).encode(), delay

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                prefix = "/v1/models/"
                if self.path.startswith(prefix):
                    status, headers, payload = server.lookup(self.path.removeprefix(prefix))
                else:
                    status, headers, payload = 404, {}, json.dumps(_error(404)).encode()
                self._send(status, headers, payload)

            def _send(self, status: int, headers: dict[str, str], payload: bytes) -> None:
                try:
                    self.send_response(status)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass  # the client gave up waiting

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length))
                headers: dict[str, str] = {}
                if self.path != "/v1/chat/completions":
                    status, payload, delay = 404, json.dumps(_error(404)).encode(), 0.0
                else:
                    status, headers, payload, delay = server.respond(body)
                time.sleep(delay)
                self._send(status, headers, payload)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


def _text_of(content: str | list[dict[str, Any]]) -> str:
    """A message's text: the content itself, or its first text part (files follow it)."""
    if isinstance(content, str):
        return content
    return next(str(p["text"]) for p in content if p.get("type") == "text")


#: What the fake bills for an image or file part, like a provider's per-image tokens.
FILE_PART_TOKENS = 1000


def _prompt_tokens(messages: list[dict[str, Any]]) -> int:
    tokens = 0
    for message in messages:
        content = message["content"]
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for part in parts:
            tokens += len(part["text"]) // 4 if part["type"] == "text" else FILE_PART_TOKENS
    return tokens


def _completion(body: dict[str, Any], content: str, reasoning: int = 0) -> dict[str, Any]:
    prompt_tokens = _prompt_tokens(body["messages"])
    answer_tokens = len(content) // 4
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    finish_reason = "stop"
    if limit is not None and reasoning + answer_tokens > limit:
        # The limit counts reasoning too: the answer is cut (with no room left, absent).
        answer_tokens = max(0, limit - reasoning)
        content = content[: answer_tokens * 4]
        reasoning = min(reasoning, limit)
        finish_reason = "length"
    completion_tokens = reasoning + answer_tokens
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if reasoning:
        usage["completion_tokens_details"] = {
            "reasoning_tokens": reasoning,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
            "audio_tokens": 0,
        }
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body["model"],
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": None},
                "finish_reason": finish_reason,
                "logprobs": None,
            }
        ],
        "usage": usage,
    }


def _error(status: int) -> dict[str, Any]:
    kind = {429: "rate_limit_exceeded", 400: "invalid_request_error"}.get(status, "server_error")
    return {"error": {"message": f"fake error {status}", "type": kind, "code": kind}}
