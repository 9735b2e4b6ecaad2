"""The grader that asks a language model, whatever the provider.

One attempt: bound the prompt's estimated input tokens, reserve quota, send the rendered
prompt, parse and check the answer. An unusable answer is asked again, up to
`answer_retries` more times within the attempt and its time budget; then the attempt
fails with `MalformedModelAnswer`, a transient error the queue retries (and the worker
records as final on the queue's last attempt).

Provider adapters (`gemini.py`, `openai_compat.py`) implement `ChatModel`: they send one
request and map the provider's failures onto the grading error tree.
"""

from __future__ import annotations

import email.utils
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from shared.adapters.graders.answer import UnusableAnswer, parse_answer
from shared.adapters.graders.limiter import QuotaLimiter
from shared.adapters.graders.prompt import GradingPrompt, RenderedPrompt
from shared.config.prices import PriceTable
from shared.domain.budgets import COST_KEY
from shared.domain.errors import (
    GraderMisconfigured,
    GradingError,
    GradingTimeout,
    MalformedModelAnswer,
    PermanentGradingError,
    PromptTooLarge,
    ProviderQuotaExhausted,
    ProviderRateLimited,
    ProviderRejected,
    ProviderUnavailable,
)
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest

log = logging.getLogger(__name__)

#: A job's estimated input tokens past this fail it before any request (a setting).
DEFAULT_MAX_INPUT_TOKENS = 200_000


@dataclass(frozen=True)
class Usage:
    """Tokens one or more provider requests took.

    `cached_input_tokens` are the part of `input_tokens` the provider served from its
    prefix cache (OpenAI's `usage.prompt_tokens_details.cached_tokens`, Gemini's
    `usage_metadata.cached_content_token_count`), billed at the cached-input price.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    requests: int = 0
    cached_input_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.total_tokens + other.total_tokens,
            self.requests + other.requests,
            self.cached_input_tokens + other.cached_input_tokens,
        )

    def as_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.total_tokens,
            "requests": self.requests,
        }


@dataclass(frozen=True)
class Completion:
    """The model's text answer to one request and what it cost."""

    text: str
    usage: Usage


class ChatModel(Protocol):
    """One provider and model: sends a rendered prompt, returns the model's answer."""

    provider: str
    model: str

    def complete(self, prompt: RenderedPrompt, *, timeout_s: float) -> Completion:
        """Send one request; raise a GradingError subclass for every provider failure.

        429 -> ProviderRateLimited, 5xx and connection errors -> ProviderUnavailable,
        timeouts -> GradingTimeout, 401/403/404 and refused parameters ->
        GraderMisconfigured, other 4xx -> ProviderRejected, a safety block or refusal ->
        GradingRefused, an answer cut at the output token limit -> ModelAnswerTruncated.
        """
        ...

    def probe(self, *, timeout_s: float) -> None:
        """Ask the provider about the model (no tokens spent); raise as `complete` does."""
        ...


def retry_after_s(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds from `retry-after-ms` or `Retry-After` (delta seconds or an HTTP date)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = (lowered.get("retry-after") or "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


#: Statuses that refuse the grader's configuration (model, key, API), not the request.
CONFIGURATION_STATUSES = frozenset({401, 403, 404})
#: Error codes that refuse what every request carries, so every job would be refused
#: alike: OpenAI's codes, and for Gemini a google.rpc status name or ErrorInfo reason
#: (the Gemini API answers an invalid key with 400 API_KEY_INVALID).
CONFIGURATION_CODES = frozenset(
    {
        "unsupported_parameter",
        "unsupported_value",
        "model_not_found",
        "invalid_api_key",
        "FAILED_PRECONDITION",
        "API_KEY_INVALID",
        "SERVICE_DISABLED",
        "BILLING_DISABLED",
        "API_KEY_SERVICE_BLOCKED",
        "CONSUMER_INVALID",
    }
)


def error_for_status(
    provider: str, status: int, retry_after: float | None, code: str | None = None
) -> GradingError:
    """The grading error for a provider's HTTP error status (its message is not kept)."""
    detail = f"{provider} answered HTTP {status}" + (f" {code}" if code else "")
    if status == 429:
        return ProviderRateLimited(detail, retry_after)
    if status >= 500 or status == 408:
        return ProviderUnavailable(detail, retry_after)
    if status in CONFIGURATION_STATUSES or code in CONFIGURATION_CODES:
        return GraderMisconfigured(detail)
    return ProviderRejected(detail)


class ModelGrader:
    """Grades with a language model behind `ChatModel`, within the instance's quota."""

    def __init__(
        self,
        chat: ChatModel,
        limiter: QuotaLimiter,
        prompt: GradingPrompt,
        max_output_tokens: int,
        answer_retries: int = 2,
        request_timeout_s: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        max_input_tokens: int = DEFAULT_MAX_INPUT_TOKENS,
        prices: PriceTable | None = None,
    ) -> None:
        self.name = chat.provider
        self._chat = chat
        self._limiter = limiter
        self._prompt = prompt
        self._max_output_tokens = max_output_tokens
        self._answer_retries = answer_retries
        self._request_timeout_s = request_timeout_s
        self._clock = clock
        self._max_input_tokens = max_input_tokens
        self._prices = prices

    def _prompt_for(self, request: GradingRequest) -> GradingPrompt:
        """The prompt version the job asks for (an assignment's), else the configured one."""
        version = request.prompt_version
        if not version or version == self._prompt.version:
            return self._prompt
        try:
            return GradingPrompt.load(version)
        except ValueError as exc:
            raise PermanentGradingError(f"unknown prompt version {version!r}") from exc

    def probe(self) -> None:
        """Check that the provider accepts the model and credentials (see `ChatModel.probe`)."""
        self._chat.probe(timeout_s=min(30.0, self._request_timeout_s))

    @property
    def model(self) -> str:
        return self._chat.model

    def render(self, request: GradingRequest) -> RenderedPrompt:
        """The request's prompt, or PromptTooLarge past the input bound (nothing sent)."""
        rendered = self._prompt_for(request).render(request)
        estimated_input = rendered.estimated_input_tokens()
        if estimated_input > self._max_input_tokens:
            # The same prompt on every attempt: failed before anything is reserved or sent.
            raise PromptTooLarge(
                f"the prompt is about {estimated_input} input tokens, at most "
                f"{self._max_input_tokens} are sent"
            )
        return rendered

    def result_of(
        self, request: GradingRequest, rendered: RenderedPrompt, completion: Completion
    ) -> GradeResult:
        """A batch's answer to one request as the job's result; MalformedModelAnswer if unusable."""
        try:
            parsed = parse_answer(completion.text, rendered)
        except UnusableAnswer as exc:
            raise MalformedModelAnswer(f"the model's answer was unusable: {exc}") from None
        return GradeResult(
            score=parsed.score,
            max_score=request.max_score,
            feedback=parsed.feedback,
            criteria=parsed.criteria,
            grader=self.name,
            model=self._chat.model,
            prompt_version=rendered.version,
            usage=self._with_cost(completion.usage.as_dict(), batch=True),
            confidence=parsed.confidence,
        )

    def grade(self, request: GradingRequest, *, attempt: int, timeout_s: float) -> GradeResult:
        deadline = self._clock() + timeout_s
        rendered = self.render(request)
        estimate = rendered.estimated_input_tokens() + self._max_output_tokens
        # Nothing has been sent yet: ProviderQuotaExhausted goes up as it is, and the
        # worker gives the job back without counting an attempt.
        reservation = self._limiter.acquire(estimate)
        usage = Usage()
        asks = self._answer_retries + 1
        problem = ""
        for ask in range(1, asks + 1):
            if ask > 1:
                try:
                    reservation = self._limiter.acquire(estimate)
                except ProviderQuotaExhausted as exc:
                    raise MalformedModelAnswer(
                        f"the model's answer was unusable ({problem}); no quota to ask again",
                        exc.retry_after_s,
                    ) from None
            remaining = deadline - self._clock()
            if remaining <= 0:
                raise GradingTimeout(f"no usable answer within {timeout_s:g}s")
            timeout = min(remaining, self._request_timeout_s)
            try:
                completion = self._chat.complete(rendered, timeout_s=timeout)
            except ProviderRateLimited as exc:
                reservation.throttled()
                if ask == 1:
                    raise  # nothing was spent: the worker gives the job back uncounted
                # An unusable answer was already paid for: this attempt counts.
                raise MalformedModelAnswer(
                    f"the model's answer was unusable ({problem}); the provider's quota "
                    "refused asking again",
                    exc.retry_after_s,
                ) from None
            reservation.settle(completion.usage.total_tokens or estimate)
            usage += completion.usage
            try:
                parsed = parse_answer(completion.text, rendered)
            except UnusableAnswer as exc:
                problem = str(exc)
                log.warning(
                    "model answer unusable",
                    extra={"reason": problem, "ask": ask, "asks": asks, "attempt": attempt},
                )
                continue
            log.info(
                "model answer accepted",
                extra={"model": self._chat.model, "ask": ask, **usage.as_dict()},
            )
            return GradeResult(
                score=parsed.score,
                max_score=request.max_score,
                feedback=parsed.feedback,
                criteria=parsed.criteria,
                grader=self.name,
                model=self._chat.model,
                prompt_version=rendered.version,
                usage=self._with_cost(usage.as_dict()),
                confidence=parsed.confidence,
                format_retries=ask - 1,
            )
        raise MalformedModelAnswer(f"the model's answer was unusable {asks} times: {problem}")

    def _with_cost(self, usage: dict[str, int], *, batch: bool = False) -> dict[str, int]:
        """`usage` with its cost from the price table (`cost_micro_usd`: millionths of a
        dollar; at the batch prices for a provider batch's answer), when the table lists
        the model."""
        if self._prices is None:
            return usage
        cost = self._prices.cost_micros(self._chat.model, usage, batch=batch)
        return usage if cost is None else {**usage, COST_KEY: cost}
