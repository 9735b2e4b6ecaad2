"""Chat completions on any OpenAI-compatible server, through the official openai SDK.

Point `base_url` at OpenAI, a hosted compatible provider, or a self-hosted model (vLLM,
llama.cpp server, Ollama: all serve `/v1/chat/completions`). The answer is requested
with the `json_schema` response format (strict), the same schema as every provider.

The output limit goes as `max_completion_tokens` (OpenAI's reasoning models refuse
`max_tokens` with 400; older compatible servers may only know `max_tokens`, which
`token_limit_param` selects), and `temperature` only when one is configured (reasoning
models refuse any value but their default).

The client is built with `max_retries=0`: the queue owns retries, with its backoff and
the provider's Retry-After, and each attempt is one request unless the answer was
unusable.
"""

from __future__ import annotations

from typing import Any

import openai
from openai.types.chat import ChatCompletion

from shared.adapters.graders.llm import Completion, Usage, error_for_status, retry_after_s
from shared.adapters.graders.parts import openai_user_content
from shared.adapters.graders.prompt import RenderedPrompt
from shared.domain.errors import (
    GradingRefused,
    GradingTimeout,
    ModelAnswerTruncated,
    ProviderUnavailable,
)

PROVIDER = "openai-compatible"
#: Finish reasons that mean the model declined to answer.
_REFUSED = frozenset({"content_filter"})
#: The request field that limits the answer's tokens (reasoning included).
TOKEN_LIMIT_PARAMS = ("max_completion_tokens", "max_tokens")


class OpenAICompatChat:
    """`ChatModel` over `client.chat.completions.create`."""

    provider = PROVIDER

    def __init__(
        self,
        client: openai.OpenAI,
        model: str,
        *,
        max_output_tokens: int,
        temperature: float | None = None,
        token_limit_param: str = TOKEN_LIMIT_PARAMS[0],
    ) -> None:
        if token_limit_param not in TOKEN_LIMIT_PARAMS:
            raise ValueError(f"token_limit_param must be one of {TOKEN_LIMIT_PARAMS}")
        self.model = model
        self._client = client
        #: The SDK client (its batch endpoints serve batch mode).
        self.client = client
        self._max_output_tokens = max_output_tokens
        self._temperature = temperature
        self._token_limit_param = token_limit_param

    def body(self, prompt: RenderedPrompt) -> dict[str, Any]:
        """The chat completions request body for `prompt` (a batch's lines carry it too)."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": prompt.system},
                {"role": "user", "content": openai_user_content(prompt.user, prompt.attachments)},
            ],
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": prompt.version.replace("-", "_"),
                    "strict": True,
                    "schema": prompt.schema,
                },
            },
            "n": 1,
            self._token_limit_param: self._max_output_tokens,
        }
        if self._temperature is not None:
            body["temperature"] = self._temperature
        return body

    def complete(self, prompt: RenderedPrompt, *, timeout_s: float) -> Completion:
        try:
            response = self._client.chat.completions.create(**self.body(prompt), timeout=timeout_s)
        except openai.APITimeoutError:
            raise GradingTimeout(f"{PROVIDER} gave no answer within {timeout_s:.0f}s") from None
        except openai.APIConnectionError:
            raise ProviderUnavailable(f"{PROVIDER} server could not be reached") from None
        except openai.APIStatusError as exc:
            raise error_for_status(
                PROVIDER, exc.status_code, retry_after_s(exc.response.headers), _code(exc.body)
            ) from None
        except openai.OpenAIError as exc:
            kind = type(exc).__name__
            raise ProviderUnavailable(f"{PROVIDER} answer unreadable: {kind}") from None
        return self.read(response)

    def read(self, response: ChatCompletion) -> Completion:
        """The answer of one chat completion; a refusal or a cut answer raises."""
        choice = response.choices[0] if response.choices else None
        if choice is not None and (choice.finish_reason in _REFUSED or choice.message.refusal):
            raise GradingRefused(f"{self.model} refused to grade the answer")
        if choice is not None and choice.finish_reason == "length":
            raise ModelAnswerTruncated(
                f"{self.model} reached its {self._token_limit_param} "
                f"({self._max_output_tokens}) before finishing its answer: raise "
                "GRADEQ_GRADER_MAX_OUTPUT_TOKENS"
            )
        usage = response.usage
        # Prompt caching is automatic; the cached part of the prompt is reported here.
        details = usage.prompt_tokens_details if usage else None
        return Completion(
            text=(choice.message.content or "") if choice is not None else "",
            usage=Usage(
                input_tokens=usage.prompt_tokens if usage else 0,
                output_tokens=usage.completion_tokens if usage else 0,
                total_tokens=usage.total_tokens if usage else 0,
                requests=1,
                cached_input_tokens=(details.cached_tokens or 0) if details else 0,
            ),
        )

    def probe(self, *, timeout_s: float) -> None:
        try:
            self._client.models.retrieve(self.model, timeout=timeout_s)
        except openai.APITimeoutError:
            raise GradingTimeout(f"{PROVIDER} gave no answer within {timeout_s:.0f}s") from None
        except openai.APIConnectionError:
            raise ProviderUnavailable(f"{PROVIDER} server could not be reached") from None
        except openai.APIStatusError as exc:
            raise error_for_status(
                PROVIDER, exc.status_code, retry_after_s(exc.response.headers), _code(exc.body)
            ) from None


def _code(body: object) -> str | None:
    """The provider's error code or type (never its message, which may echo input)."""
    error = body.get("error", body) if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return None
    for key in ("code", "type"):
        value = error.get(key)
        if isinstance(value, str) and value.isidentifier():
            return value
    return None
