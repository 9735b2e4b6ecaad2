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
"""

from __future__ import annotations

import json
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

_MARKER = re.compile(r"#(429|500|malformed|slow)x(\d+)(?:=(\d+(?:\.\d+)?))?|#status=(\d{3})")


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
    }


class FakeOpenAIServer(LoopbackServer):
    """`/v1/chat/completions` on 127.0.0.1; `url` is the base URL for the openai SDK."""

    def __init__(self) -> None:
        self.served: list[Served] = []
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

    def respond(self, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes, float]:
        """Status, headers, body and delay for one chat completions request."""
        document = json.loads(body["messages"][-1]["content"])
        answer = document["answer"]
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
        return self._log(200, answer, body, {}, _completion(body, content), delay)

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

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length))
                headers: dict[str, str] = {}
                if self.path != "/v1/chat/completions":
                    status, payload, delay = 404, json.dumps(_error(404)).encode(), 0.0
                else:
                    status, headers, payload, delay = server.respond(body)
                time.sleep(delay)
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

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


def _completion(body: dict[str, Any], content: str) -> dict[str, Any]:
    prompt_tokens = sum(len(m["content"]) for m in body["messages"]) // 4
    completion_tokens = len(content) // 4
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body["model"],
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": None},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _error(status: int) -> dict[str, Any]:
    kind = {429: "rate_limit_exceeded", 400: "invalid_request_error"}.get(status, "server_error")
    return {"error": {"message": f"fake error {status}", "type": kind, "code": kind}}
