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

The Batch API (`/v1/files` and `/v1/batches`) grades a batch's lines as
`/v1/chat/completions` would answer them; `batch_outcome` says how its batches end
(`completed`, `failed`, `expired`, `cancelled`), after `batch_polls` retrievals answered
`validating`, then `in_progress`. An expired batch answers only its first
`expired_answers` requests (the others go to the error file with code `batch_expired`,
as OpenAI's batch guide describes).

Server-wide settings act like the provider's side of a deployment:
- `refusal`: every request (the model lookup included) answers this error, e.g.
  `REVOKED_KEY` or `UNKNOWN_MODEL`, shaped as OpenAI's API reference shows them.
- prefix caching, as OpenAI's prompt caching documents it: a prompt of at least
  `min_cached_prefix_tokens` (1024 by default) whose beginning matches, byte for byte,
  one the server saw before reports the matched part in
  `usage.prompt_tokens_details.cached_tokens`, in steps of 128 tokens. Tokens are
  counted as 4 characters each (the fake's own count); nothing is ever evicted;
  `prefix_caching=False` turns it off.
- `reasoning_tokens`: the model reasons before answering, as OpenAI's reasoning models
  do: it refuses `max_tokens` and any `temperature` but 1 (400), counts its reasoning in
  `completion_tokens` (`completion_tokens_details.reasoning_tokens`), and ends with
  `finish_reason` "length" and no content when `max_completion_tokens` leaves no room.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass
from email.parser import BytesParser
from email.policy import default
from http.server import BaseHTTPRequestHandler
from typing import Any

from shared.adapters.graders.rubric import RubricGrader
from shared.domain.job import GradingRequest
from tests.support.loopback import LoopbackServer

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
                # A sentence, as a model writes: at most three of the terms it matched.
                "justification": "Mentions " + ", ".join(checked["matched"][:3])
                if checked["matched"]
                else "The answer does not address this.",
            }
            for c, checked in zip(document["criteria"], graded.criteria, strict=True)
        ],
        "score": graded.score,
        # Two to four sentences, as the instructions ask (the keyword rules' feedback names
        # every criterion missed, which a long rubric makes far longer than a model's).
        "feedback": _shortened(graded.feedback, FEEDBACK_CHARS),
        "confidence": graded.confidence,
    }


#: A model's feedback of two to four sentences is about this long.
FEEDBACK_CHARS = 400


def _shortened(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + "..."


class FakeOpenAIServer(LoopbackServer):
    """`/v1/chat/completions` on 127.0.0.1; `url` is the base URL for the openai SDK."""

    def __init__(
        self,
        reasoning_tokens: int = 0,
        *,
        prefix_caching: bool = True,
        min_cached_prefix_tokens: int = 1024,
    ) -> None:
        self.refusal: Refusal | None = None
        self.prefix_cache = PrefixCache(min_cached_prefix_tokens) if prefix_caching else None
        self.reasoning_tokens = reasoning_tokens
        #: The model lookups (GET /v1/models/{id}) answered, by status.
        self.lookups: list[int] = []
        self.served: list[Served] = []
        self._seen: Counter[str] = Counter()
        self._lock = threading.Lock()
        #: Chat completions requests answered one at a time (not in a batch).
        self.graded = 0
        self.batch_outcome = "completed"
        self.batch_polls = 2
        self.expired_answers = 0
        #: Files (`/v1/files`) by id: purpose and content; batches by id.
        self.files: dict[str, tuple[str, bytes]] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self._retrievals: Counter[str] = Counter()
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
        if self.prefix_cache is not None:
            cached = min(
                self.prefix_cache.serve(_prompt_text(body)), reply["usage"]["prompt_tokens"]
            )
            reply["usage"]["prompt_tokens_details"] = {"cached_tokens": cached, "audio_tokens": 0}
        return self._log(200, answer, body, {}, reply, delay)

    # --- the Batch API (files and batches endpoints) ---------------------------------------

    def upload(self, purpose: str, filename: str, data: bytes) -> dict[str, Any]:
        """`POST /v1/files`: the File object."""
        with self._lock:
            file_id = f"file-{len(self.files) + 1:06d}"
            self.files[file_id] = (purpose, data)
        return _file_object(file_id, purpose, filename, len(data))

    def create_batch(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """`POST /v1/batches`: a batch over an uploaded `batch` file, `validating`."""
        stored = self.files.get(body.get("input_file_id", ""))
        if stored is None or stored[0] != "batch":
            return 400, _error(400)
        if body.get("endpoint") != "/v1/chat/completions" or body.get("completion_window") != "24h":
            return 400, _error(400)
        with self._lock:
            batch_id = f"batch_{len(self.batches) + 1:06d}"
            batch = {
                "id": batch_id,
                "object": "batch",
                "endpoint": body["endpoint"],
                "errors": None,
                "input_file_id": body["input_file_id"],
                "completion_window": "24h",
                "status": "validating",
                "output_file_id": None,
                "error_file_id": None,
                "created_at": int(time.time()),
                "in_progress_at": None,
                "expires_at": int(time.time()) + 86400,
                "completed_at": None,
                "failed_at": None,
                "expired_at": None,
                "request_counts": {"total": 0, "completed": 0, "failed": 0},
                "metadata": body.get("metadata"),
            }
            self.batches[batch_id] = batch
        return 200, batch

    def retrieve_batch(self, batch_id: str) -> tuple[int, dict[str, Any]]:
        """`GET /v1/batches/{id}`: the batch, a step further on each retrieval."""
        batch = self.batches.get(batch_id)
        if batch is None:
            return 404, _error(404)
        with self._lock:
            self._retrievals[batch_id] += 1
            n = self._retrievals[batch_id]
        if batch["status"] in ("validating", "in_progress"):
            if n < self.batch_polls:
                batch["status"] = "validating" if n == 1 else "in_progress"
            else:
                self._end(batch)
        return 200, batch

    def _end(self, batch: dict[str, Any]) -> None:
        now = int(time.time())
        outcome = self.batch_outcome
        if outcome == "failed":
            batch.update(
                status="failed",
                failed_at=now,
                errors={
                    "object": "list",
                    "data": [
                        {
                            "code": "invalid_request",
                            "message": "fake: the batch's input was refused",
                            "param": None,
                            "line": 1,
                        }
                    ],
                },
            )
            return
        lines = [json.loads(x) for x in self.files[batch["input_file_id"]][1].splitlines() if x]
        answered = lines if outcome == "completed" else lines[: self.expired_answers]
        output, errors = [], []
        for i, line in enumerate(lines):
            if line in answered:
                status, _, payload, _ = self.respond(line["body"])
                output.append(
                    {
                        "id": f"batch_req_{i}",
                        "custom_id": line["custom_id"],
                        "response": {
                            "status_code": status,
                            "request_id": f"req_{i}",
                            "body": json.loads(payload),
                        },
                        "error": None,
                    }
                )
            elif outcome != "cancelled":
                error = {
                    "code": "batch_expired",
                    "message": "This request could not be executed before the completion "
                    "window expired.",
                }
                errors.append(
                    {
                        "id": f"batch_req_{i}",
                        "custom_id": line["custom_id"],
                        "response": None,
                        "error": error,
                    }
                )
        for kind, rows in (("output_file_id", output), ("error_file_id", errors)):
            if rows:
                data = "".join(json.dumps(r) + "\n" for r in rows).encode()
                batch[kind] = self.upload("batch_output", f"{batch['id']}_{kind}.jsonl", data)["id"]
        ended = {"completed": "completed_at", "expired": "expired_at", "cancelled": "cancelled_at"}
        batch.update(status=outcome, **{ended[outcome]: now})
        batch["request_counts"] = {
            "total": len(lines),
            "completed": len(output),
            "failed": len(lines) - len(output),
        }

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
                batch = _BATCH.match(self.path)
                content = _FILE_CONTENT.match(self.path)
                if self.path.startswith(prefix):
                    status, headers, payload = server.lookup(self.path.removeprefix(prefix))
                elif batch is not None:
                    status, found = server.retrieve_batch(batch.group(1))
                    headers, payload = {}, json.dumps(found).encode()
                elif content is not None and content.group(1) in server.files:
                    self._send(200, {}, server.files[content.group(1)][1], "application/jsonl")
                    return
                else:
                    status, headers, payload = 404, {}, json.dumps(_error(404)).encode()
                self._send(status, headers, payload)

            def _send(
                self,
                status: int,
                headers: dict[str, str],
                payload: bytes,
                content_type: str = "application/json",
            ) -> None:
                try:
                    self.send_response(status)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass  # the client gave up waiting

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                if self.path == "/v1/files":
                    purpose, filename, data = _multipart(self.headers["Content-Type"], raw)
                    self._send(200, {}, json.dumps(server.upload(purpose, filename, data)).encode())
                    return
                body = json.loads(raw)
                headers: dict[str, str] = {}
                if self.path == "/v1/batches":
                    status, created = server.create_batch(body)
                    self._send(status, {}, json.dumps(created).encode())
                    return
                if self.path != "/v1/chat/completions":
                    status, payload, delay = 404, json.dumps(_error(404)).encode(), 0.0
                else:
                    server.graded += 1
                    status, headers, payload, delay = server.respond(body)
                time.sleep(delay)
                self._send(status, headers, payload)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


_BATCH = re.compile(r"^/v1/batches/([^/?]+)$")
_FILE_CONTENT = re.compile(r"^/v1/files/([^/?]+)/content$")


def _file_object(file_id: str, purpose: str, filename: str, size: int) -> dict[str, Any]:
    return {
        "id": file_id,
        "object": "file",
        "bytes": size,
        "created_at": int(time.time()),
        "filename": filename,
        "purpose": purpose,
        "status": "processed",
        "expires_at": None,
        "status_details": None,
    }


def _multipart(content_type: str, body: bytes) -> tuple[str, str, bytes]:
    """The `purpose` field and the `file` part (name, bytes) of a multipart upload."""
    message = BytesParser(policy=default).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + body
    )
    purpose, filename, data = "", "", b""
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        assert isinstance(payload, bytes)
        if name == "purpose":
            purpose = payload.decode()
        elif name == "file":
            filename, data = str(part.get_filename() or ""), payload
    return purpose, filename, data


def _text_of(content: str | list[dict[str, Any]]) -> str:
    """A message's text: the content itself, or its first text part (files follow it)."""
    if isinstance(content, str):
        return content
    return next(str(p["text"]) for p in content if p.get("type") == "text")


class PrefixCache:
    """Prompt prefixes seen before, at the boundaries where a provider caches them."""

    def __init__(self, min_tokens: int = 1024, step_tokens: int = 128) -> None:
        self.min_tokens = min_tokens
        self.step_tokens = step_tokens
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def serve(self, text: str) -> int:
        """The cached tokens of a prompt (0 below the minimum); remembers its prefixes."""
        tokens = len(text) // CHARS_PER_TOKEN
        boundaries = range(self.min_tokens, tokens + 1, self.step_tokens)
        digests = [(n, _digest(text[: n * CHARS_PER_TOKEN])) for n in boundaries]
        with self._lock:
            cached = max((n for n, d in digests if d in self._seen), default=0)
            self._seen.update(d for _, d in digests)
        return cached


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _prompt_text(body: dict[str, Any]) -> str:
    """The messages' text, in order: what the fake counts as prompt tokens (the response
    schema, which OpenAI counts and caches too, is left out of both)."""
    pieces: list[str] = []
    for message in body["messages"]:
        content = message["content"]
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        pieces.extend(p["text"] if p["type"] == "text" else json.dumps(p) for p in parts)
    return "".join(pieces)


CHARS_PER_TOKEN = 4
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
