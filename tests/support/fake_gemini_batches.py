"""The fake Gemini API (tests/support/fake_gemini.py) with Gemini batch mode on top.

`models/{model}:batchGenerateContent` with inline requests, then `batches/{name}`, answer
as the Gemini API's batch reference shows them (ai.google.dev/api/batch-mode, read
2026-12-01): a long-running operation whose `metadata` (a GenerateContentBatch) holds the
state (`BATCH_STATE_PENDING`, `_RUNNING`, then `batch_outcome`: `SUCCEEDED`, `FAILED`,
`EXPIRED` or `CANCELLED` after `batch_polls` reads) and, once it ended,
`output.inlinedResponses` with each request's response or error and its `metadata`. Each
request is answered as the fake's `generateContent` answers it; an expired batch answers
its first `expired_answers` requests only.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.fake_gemini import FakeGeminiServer

_TYPES = "type.googleapis.com/google.ai.generativelanguage.v1beta."
_CREATE = re.compile(r"^/[^/]+/models/([^/:]+):batchGenerateContent$")
_GET = re.compile(r"^/[^/]+/(batches/[^/:?]+)$")
#: The outcome names the OpenAI fake uses, as Gemini's batch states.
_STATES = {"completed": "SUCCEEDED"}


class FakeGeminiBatchServer(FakeGeminiServer):
    """The fake Gemini API, its batch endpoints included; `graded` counts one-by-one calls."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        #: generateContent requests answered one at a time (not in a batch).
        self.graded = 0
        self.batch_outcome = "completed"
        self.batch_polls = 2
        self.expired_answers = 0
        self.batches: dict[str, dict[str, Any]] = {}
        self._reads: dict[str, int] = {}
        self._batch_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def generate(self, model: str, body: dict[str, Any], *args: Any) -> Any:
        with self._batch_lock:
            self.graded += 1
        return super().generate(model, body, *args)

    def create_batch(self, model: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """`batchGenerateContent`: the operation of a new batch, pending."""
        batch = body.get("batch") or {}
        requests = ((batch.get("inputConfig") or {}).get("requests") or {}).get("requests")
        if not requests:
            return 400, {
                "error": {"code": 400, "message": "no requests", "status": "INVALID_ARGUMENT"}
            }
        with self._batch_lock:
            name = f"batches/fake{len(self.batches) + 1:06d}"
            self.batches[name] = {
                "name": name,
                "metadata": {
                    "@type": _TYPES + "GenerateContentBatch",
                    "model": f"models/{model}",
                    "displayName": batch.get("displayName", ""),
                    "createTime": "2026-12-01T00:00:00Z",
                    "updateTime": "2026-12-01T00:00:00Z",
                    "batchStats": {"requestCount": str(len(requests))},
                    "state": "BATCH_STATE_PENDING",
                    "name": name,
                },
                "_requests": requests,
                "_model": model,
            }
            self._reads[name] = 0
        return 200, _public(self.batches[name])

    def get_batch(self, name: str) -> tuple[int, dict[str, Any]]:
        """`batches/{name}`: the batch's operation, a step further on each read."""
        batch = self.batches.get(name)
        if batch is None:
            return 404, {"error": {"code": 404, "message": name, "status": "NOT_FOUND"}}
        with self._batch_lock:
            self._reads[name] += 1
            n = self._reads[name]
        meta = batch["metadata"]
        if meta["state"] in ("BATCH_STATE_PENDING", "BATCH_STATE_RUNNING"):
            if n < self.batch_polls:
                meta["state"] = "BATCH_STATE_RUNNING"
            else:
                self._end(batch)
        return 200, _public(batch)

    def _end(self, batch: dict[str, Any]) -> None:
        meta = batch["metadata"]
        outcome = self.batch_outcome
        meta["state"] = "BATCH_STATE_" + _STATES.get(outcome, outcome.upper())
        meta["endTime"] = "2026-12-01T01:00:00Z"
        batch["done"] = True
        if outcome == "failed":
            batch["error"] = {"code": 3, "message": "fake: the batch failed"}
            return
        requests = batch["_requests"]
        answered = requests if outcome == "completed" else requests[: self.expired_answers]
        responses = []
        for item in answered:
            # Answered as generateContent answers, without counting it as one-by-one.
            reply = FakeGeminiServer.generate(self, batch["_model"], item["request"])
            status, payload = reply[0], reply[-1]
            key = "response" if status == 200 else "error"
            value = payload if status == 200 else payload["error"]
            responses.append({key: value, "metadata": item.get("metadata")})
        output = {"inlinedResponses": {"inlinedResponses": responses}}
        meta["output"] = output
        batch["response"] = {"@type": _TYPES + "GenerateContentBatchOutput", **output}

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        base = super()._handler_class()
        server = self

        class Handler(base):  # type: ignore[valid-type,misc]
            def do_POST(self) -> None:  # noqa: N802 - BaseHTTPRequestHandler's name
                match = _CREATE.match(self.path.split("?")[0])
                if match is None:
                    super().do_POST()
                    return
                length = int(self.headers.get("Content-Length") or 0)
                self._reply(
                    *server.create_batch(match.group(1), json.loads(self.rfile.read(length)))
                )

            def do_GET(self) -> None:  # noqa: N802 - BaseHTTPRequestHandler's name
                match = _GET.match(self.path.split("?")[0])
                if match is None:
                    super().do_GET()
                    return
                self._reply(*server.get_batch(match.group(1)))

            def _reply(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=UTF-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


def _public(batch: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in batch.items() if not k.startswith("_")}
