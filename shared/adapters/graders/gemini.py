"""Gemini, on Vertex AI (Application Default Credentials) or the Gemini API (API key).

Built on the official google-genai SDK: one client for both endpoints, structured output
through `response_json_schema`, and usage metadata on every answer. The SDK's own
retries stay off (no `retry_options`): the queue owns retries, with its backoff and the
provider's Retry-After (or the RetryInfo of a RESOURCE_EXHAUSTED answer).

Gemini 2.5 and later think before answering, and thinking tokens count against
`max_output_tokens`: every request sets its thinking explicitly (a budget of tokens for
the 2.x models, a level for the later ones), and an answer cut at the limit (finish
reason MAX_TOKENS) is its own outcome, not an unusable answer to ask again.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

import google.auth.exceptions
import httpx2
from google.genai import Client, errors, types

from shared.adapters.graders.gemini_cache import GeminiContextCaches
from shared.adapters.graders.llm import Completion, Usage, error_for_status, retry_after_s
from shared.adapters.graders.parts import gemini_contents
from shared.adapters.graders.prompt import RenderedPrompt
from shared.domain.errors import (
    GraderMisconfigured,
    GradingRefused,
    GradingTimeout,
    ModelAnswerTruncated,
    ProviderRejected,
    ProviderUnavailable,
)

PROVIDER = "gemini"
#: Candidate finish reasons that mean the model declined (safety, policy, recitation).
_REFUSED = frozenset(
    {
        types.FinishReason.SAFETY,
        types.FinishReason.BLOCKLIST,
        types.FinishReason.PROHIBITED_CONTENT,
        types.FinishReason.SPII,
        types.FinishReason.RECITATION,
    }
)
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)s$")
#: Models that take a thinking budget in tokens; later ones take a thinking level.
_BUDGETED = re.compile(r"^gemini-2\.")
#: The 2.x models' budget when none is configured: room for the answer stays.
DEFAULT_THINKING_BUDGET = 1024

T = TypeVar("T")


def thinking_config(model: str, level: str, budget: int | None) -> types.ThinkingConfig:
    """The request's thinking: `budget` tokens if set or the model is a 2.x, else `level`.

    Sending both is refused (400), so exactly one is set.
    """
    if budget is not None:
        return types.ThinkingConfig(thinking_budget=budget)
    if _BUDGETED.match(model.removeprefix("models/")):
        return types.ThinkingConfig(thinking_budget=DEFAULT_THINKING_BUDGET)
    return types.ThinkingConfig(thinking_level=types.ThinkingLevel(level.upper()))


class GeminiChat:
    """`ChatModel` over `client.models.generate_content`."""

    provider = PROVIDER

    def __init__(
        self,
        client: Client,
        model: str,
        *,
        max_output_tokens: int,
        temperature: float | None = None,
        thinking_level: str = "low",
        thinking_budget: int | None = None,
        caches: GeminiContextCaches | None = None,
    ) -> None:
        # Explicit context caches for assignments' shared prefixes (None: never).
        self._caches = caches
        self.model = model
        self._client = client
        #: The SDK client (its batch endpoints serve batch mode).
        self.client = client
        self._max_output_tokens = max_output_tokens
        self._temperature = temperature
        self._thinking = thinking_config(model, thinking_level, thinking_budget)

    def complete(self, prompt: RenderedPrompt, *, timeout_s: float) -> Completion:
        cache = self._caches.name_for(prompt, self.model) if self._caches else None
        if cache is not None:
            try:
                return self._complete(prompt, timeout_s, cache)
            except (GraderMisconfigured, ProviderRejected):
                # The cache went away (expired, deleted) between lookup and use: the
                # request goes out whole rather than suspending grading.
                assert self._caches is not None
                self._caches.forget(prompt, self.model)
        return self._complete(prompt, timeout_s, None)

    def _complete(self, prompt: RenderedPrompt, timeout_s: float, cache: str | None) -> Completion:
        # With a cache, the instructions and the rubric are in it: only the answer is sent.
        config = types.GenerateContentConfig(
            system_instruction=None if cache else prompt.system,
            cached_content=cache,
            response_mime_type="application/json",
            response_json_schema=prompt.schema,
            # Unset, the model's own default (Gemini 3 is tuned for its default of 1.0).
            temperature=self._temperature,
            max_output_tokens=self._max_output_tokens,
            thinking_config=self._thinking,
            http_options=types.HttpOptions(timeout=max(1, int(timeout_s * 1000))),
        )
        response = _call(
            lambda: self._client.models.generate_content(
                model=self.model,
                contents=gemini_contents(
                    prompt.answer_part if cache else prompt.user, prompt.attachments
                ),
                config=config,
            ),
            timeout_s,
        )
        feedback = response.prompt_feedback
        if feedback is not None and feedback.block_reason is not None:
            raise GradingRefused(f"{self.model} blocked the request ({feedback.block_reason})")
        candidate = response.candidates[0] if response.candidates else None
        if candidate is not None and candidate.finish_reason in _REFUSED:
            raise GradingRefused(f"{self.model} stopped answering ({candidate.finish_reason})")
        usage = _usage(response.usage_metadata)
        if candidate is not None and candidate.finish_reason == types.FinishReason.MAX_TOKENS:
            meta = response.usage_metadata
            thoughts = (meta.thoughts_token_count or 0) if meta is not None else 0
            raise ModelAnswerTruncated(
                f"{self.model} reached max_output_tokens ({self._max_output_tokens}) before "
                f"finishing its answer, {thoughts} of them thinking: raise "
                "GRADEQ_GRADER_MAX_OUTPUT_TOKENS or lower the thinking"
            )
        parts = candidate.content.parts if candidate and candidate.content else None
        text = "".join(p.text for p in parts or [] if p.text and not p.thought)
        return Completion(text=text, usage=usage)

    def probe(self, *, timeout_s: float) -> None:
        http_options = types.HttpOptions(timeout=max(1, int(timeout_s * 1000)))
        _call(
            lambda: self._client.models.get(
                model=self.model, config=types.GetModelConfig(http_options=http_options)
            ),
            timeout_s,
        )


def _call(request: Callable[[], T], timeout_s: float) -> T:
    """Run one SDK request, mapping its failures onto the grading error tree."""
    try:
        return request()
    except errors.APIError as exc:
        headers = exc.response.headers if exc.response is not None else {}
        wait = retry_after_s(headers)
        if wait is None:
            wait = _retry_info(exc.details)
        code = _error_reason(exc.details) or exc.status
        raise error_for_status(PROVIDER, exc.code, wait, code) from None
    except httpx2.TimeoutException:
        raise GradingTimeout(f"{PROVIDER} gave no answer within {timeout_s:.0f}s") from None
    except httpx2.TransportError:
        raise ProviderUnavailable(f"{PROVIDER} could not be reached") from None
    except google.auth.exceptions.DefaultCredentialsError:
        raise GraderMisconfigured("no Application Default Credentials for Vertex AI") from None
    except google.auth.exceptions.RefreshError:
        raise GraderMisconfigured("the service account's credentials were refused") from None
    except google.auth.exceptions.TransportError:
        raise ProviderUnavailable("credentials could not be fetched") from None


def _usage(meta: types.GenerateContentResponseUsageMetadata | None) -> Usage:
    if meta is None:
        return Usage(requests=1)
    return Usage(
        input_tokens=meta.prompt_token_count or 0,
        # Thinking tokens are billed as output.
        output_tokens=(meta.candidates_token_count or 0) + (meta.thoughts_token_count or 0),
        total_tokens=meta.total_token_count or 0,
        requests=1,
        # Implicit or explicit cache hits; counted within prompt_token_count.
        cached_input_tokens=meta.cached_content_token_count or 0,
    )


def _error_reason(details: Any) -> str | None:
    """The reason of a google.rpc.ErrorInfo in an error body (e.g. API_KEY_INVALID).

    The Gemini API answers an invalid key with 400 INVALID_ARGUMENT: only this reason
    tells it from a refused request.
    """
    error = details.get("error", details) if isinstance(details, dict) else None
    for item in (error or {}).get("details") or []:
        if isinstance(item, dict) and str(item.get("@type", "")).endswith("google.rpc.ErrorInfo"):
            reason = item.get("reason")
            if isinstance(reason, str) and reason.isidentifier():
                return reason
    return None


def _retry_info(details: Any) -> float | None:
    """The retryDelay of a google.rpc.RetryInfo in an error body, in seconds."""
    error = details.get("error", details) if isinstance(details, dict) else None
    for item in (error or {}).get("details") or []:
        if isinstance(item, dict) and str(item.get("@type", "")).endswith("google.rpc.RetryInfo"):
            match = _DURATION.match(str(item.get("retryDelay", "")))
            if match:
                return float(match.group(1))
    return None


# --- batch mode (shared/adapters/graders/provider_batch.py) -------------------------------


def batch_config(chat: GeminiChat, prompt: RenderedPrompt) -> types.GenerateContentConfig:
    """A batch request's config: the one-by-one request's, without a timeout."""
    return types.GenerateContentConfig(
        system_instruction=prompt.system,
        response_mime_type="application/json",
        response_json_schema=prompt.schema,
        temperature=chat._temperature,
        max_output_tokens=chat._max_output_tokens,
        thinking_config=chat._thinking,
    )


def batch_completion(chat: GeminiChat, response: types.GenerateContentResponse) -> Completion:
    """A batch's answer to one request, checked as `GeminiChat.complete` checks its own."""
    feedback = response.prompt_feedback
    if feedback is not None and feedback.block_reason is not None:
        raise GradingRefused(f"{chat.model} blocked the request ({feedback.block_reason})")
    candidate = response.candidates[0] if response.candidates else None
    if candidate is not None and candidate.finish_reason in _REFUSED:
        raise GradingRefused(f"{chat.model} stopped answering ({candidate.finish_reason})")
    if candidate is not None and candidate.finish_reason == types.FinishReason.MAX_TOKENS:
        raise ModelAnswerTruncated(
            f"{chat.model} reached max_output_tokens ({chat._max_output_tokens}) before "
            "finishing its answer: raise GRADEQ_GRADER_MAX_OUTPUT_TOKENS or lower the thinking"
        )
    parts = candidate.content.parts if candidate and candidate.content else None
    text = "".join(p.text for p in parts or [] if p.text and not p.thought)
    return Completion(text=text, usage=_usage(response.usage_metadata))
