"""A small Gemini API on loopback: `generateContent` and the `cachedContents` resource.

The shapes are the Gemini API reference's (ai.google.dev/api/caching and
/api/generate-content, read 2026-12-01): `POST /{version}/cachedContents` creates a cache
from `systemInstruction` and `contents` with a `ttl`, answering its `name`
("cachedContents/..."), `expireTime` and `usageMetadata.totalTokenCount`; `PATCH
/{version}/{name}` with `{"ttl"}` moves its expiry; `DELETE` removes it; a
`generateContent` naming it in `cachedContent` is read as the cache's contents followed by
the request's, and reports the cache's tokens in `usageMetadata.cachedContentTokenCount`.
A cache smaller than `min_cache_tokens` is refused (400), as the API refuses one under the
model's minimum; an expired or deleted one answers 404.

It acts as a deterministic model (the keyword rules, as tests/support/fake_openai.py
does), counts 4 characters as a token, and keeps time on `clock` so tests can move it.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.fake_openai import CHARS_PER_TOKEN, grade_document
from tests.support.loopback import LoopbackServer

_GENERATE = re.compile(r"^/v1(?:beta\d?)?/models/([^/:]+):generateContent$")
_CACHES = re.compile(r"^/v1(?:beta\d?)?/cachedContents$")
_CACHE = re.compile(r"^/v1(?:beta\d?)?/(cachedContents/[\w-]+)$")


@dataclass
class Cache:
    name: str
    model: str
    system: str
    text: str
    expire_at: datetime
    tokens: int


@dataclass
class Calls:
    created: list[str] = field(default_factory=list)
    renewed: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    #: Each generateContent: the cache it named ("" for none) and its request text.
    generated: list[tuple[str, str]] = field(default_factory=list)


def _text(contents: list[dict[str, Any]] | None) -> str:
    return "".join(
        part.get("text", "") for content in contents or [] for part in content.get("parts", [])
    )


def _ttl(value: str) -> timedelta:
    return timedelta(seconds=float(value.removesuffix("s")))


def _error(status: int, reason: str, message: str) -> dict[str, Any]:
    return {"error": {"code": status, "status": reason, "message": message}}


class FakeGeminiServer(LoopbackServer):
    """The Gemini API on 127.0.0.1; `url` is the base URL for google-genai's HttpOptions."""

    def __init__(
        self,
        min_cache_tokens: int = 2048,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.min_cache_tokens = min_cache_tokens
        self.clock = clock
        self.caches: dict[str, Cache] = {}
        self.calls = Calls()
        self._lock = threading.Lock()
        self._ids = 0
        super().__init__(self._handler_class())

    @property
    def url(self) -> str:
        return self.base_url + "/"

    def _cache(self, name: str) -> Cache | None:
        cache = self.caches.get(name)
        if cache is None or cache.expire_at <= self.clock():
            return None
        return cache

    def _describe(self, cache: Cache) -> dict[str, Any]:
        return {
            "name": cache.name,
            "model": f"models/{cache.model}",
            "expireTime": cache.expire_at.isoformat().replace("+00:00", "Z"),
            "usageMetadata": {"totalTokenCount": cache.tokens},
        }

    def create(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        system = _text([body["systemInstruction"]]) if body.get("systemInstruction") else ""
        text = _text(body.get("contents"))
        tokens = (len(system) + len(text)) // CHARS_PER_TOKEN
        if tokens < self.min_cache_tokens:
            return 400, _error(
                400,
                "INVALID_ARGUMENT",
                f"Cached content is too small. total_token_count={tokens}, "
                f"min_total_token_count={self.min_cache_tokens}",
            )
        with self._lock:
            self._ids += 1
            name = f"cachedContents/fake{self._ids}"
            cache = Cache(
                name,
                str(body["model"]).removeprefix("models/"),
                system,
                text,
                self.clock() + _ttl(body.get("ttl", "3600s")),
                tokens,
            )
            self.caches[name] = cache
            self.calls.created.append(name)
        return 200, self._describe(cache)

    def renew(self, name: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            cache = self._cache(name)
            if cache is None:
                return 404, _error(404, "NOT_FOUND", "CachedContent not found")
            cache.expire_at = self.clock() + _ttl(body["ttl"])
            self.calls.renewed.append(name)
            return 200, self._describe(cache)

    def delete(self, name: str) -> tuple[int, dict[str, Any]]:
        with self._lock:
            if self.caches.pop(name, None) is None:
                return 404, _error(404, "NOT_FOUND", "CachedContent not found")
            self.calls.deleted.append(name)
        return 200, {}

    def generate(self, model: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        text = _text(body.get("contents"))
        system = _text([body["systemInstruction"]]) if body.get("systemInstruction") else ""
        cached_tokens = 0
        name = body.get("cachedContent") or ""
        if name:
            if body.get("systemInstruction"):
                return 400, _error(
                    400, "INVALID_ARGUMENT", "CachedContent can not be used with system_instruction"
                )
            with self._lock:
                cache = self._cache(name)
            if cache is None or cache.model != model:
                return 404, _error(404, "NOT_FOUND", "CachedContent not found")
            system, text, cached_tokens = cache.system, cache.text + text, cache.tokens
        with self._lock:
            self.calls.generated.append((name, _text(body.get("contents"))))
        answer = json.dumps(grade_document(json.loads(text)))
        prompt_tokens = (len(system) + len(text)) // CHARS_PER_TOKEN
        output_tokens = len(answer) // CHARS_PER_TOKEN
        usage: dict[str, Any] = {
            "promptTokenCount": prompt_tokens,
            "candidatesTokenCount": output_tokens,
            "totalTokenCount": prompt_tokens + output_tokens,
        }
        if cached_tokens:
            usage["cachedContentTokenCount"] = cached_tokens
        reply = {
            "candidates": [
                {"content": {"role": "model", "parts": [{"text": answer}]}, "finishReason": "STOP"}
            ],
            "usageMetadata": usage,
            "modelVersion": model,
        }
        return 200, reply

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _body(self) -> dict[str, Any]:
                length = int(self.headers.get("Content-Length") or 0)
                data: dict[str, Any] = json.loads(self.rfile.read(length) or b"{}")
                return data

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                path = self.path.split("?")[0]
                body = self._body()
                if match := _GENERATE.match(path):
                    self._send(*server.generate(match.group(1), body))
                elif _CACHES.match(path):
                    self._send(*server.create(body))
                else:
                    self._send(404, _error(404, "NOT_FOUND", path))

            def do_PATCH(self) -> None:
                match = _CACHE.match(self.path.split("?")[0])
                body = self._body()
                self._send(*(server.renew(match.group(1), body) if match else (404, {})))

            def do_DELETE(self) -> None:
                match = _CACHE.match(self.path.split("?")[0])
                self._send(*(server.delete(match.group(1)) if match else (404, {})))

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler
