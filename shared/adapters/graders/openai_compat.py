"""Chat completions on any OpenAI-compatible server, through the official openai SDK.

Point `base_url` at OpenAI, a hosted compatible provider, or a self-hosted model (vLLM,
llama.cpp server, Ollama: all serve `/v1/chat/completions`). The answer is requested
with the `json_schema` response format (strict), the same schema as every provider.

The client is built with `max_retries=0`: the queue owns retries, with its backoff and
the provider's Retry-After, and each attempt is one request unless the answer was
unusable.
"""

from __future__ import annotations

import openai

from shared.adapters.graders.llm import Completion, Usage, error_for_status, retry_after_s
from shared.adapters.graders.prompt import RenderedPrompt
from shared.domain.errors import GradingRefused, GradingTimeout, ProviderUnavailable

PROVIDER = "openai-compatible"
#: Finish reasons that mean the model declined to answer.
_REFUSED = frozenset({"content_filter"})


class OpenAICompatChat:
    """`ChatModel` over `client.chat.completions.create`."""

    provider = PROVIDER

    def __init__(
        self,
        client: openai.OpenAI,
        model: str,
        *,
        max_output_tokens: int,
        temperature: float = 0.0,
    ) -> None:
        self.model = model
        self._client = client
        self._max_output_tokens = max_output_tokens
        self._temperature = temperature

    def complete(self, prompt: RenderedPrompt, *, timeout_s: float) -> Completion:
        try:
            response = self._client.chat.completions.create(
                model=self.model,
                messages=[
                    {"role": "system", "content": prompt.system},
                    {"role": "user", "content": prompt.user},
                ],
                response_format={
                    "type": "json_schema",
                    "json_schema": {
                        "name": prompt.version.replace("-", "_"),
                        "strict": True,
                        "schema": prompt.schema,
                    },
                },
                temperature=self._temperature,
                max_tokens=self._max_output_tokens,
                n=1,
                timeout=timeout_s,
            )
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

        choice = response.choices[0] if response.choices else None
        if choice is not None and (choice.finish_reason in _REFUSED or choice.message.refusal):
            raise GradingRefused(f"{self.model} refused to grade the answer")
        usage = response.usage
        return Completion(
            text=(choice.message.content or "") if choice is not None else "",
            usage=Usage(
                input_tokens=usage.prompt_tokens if usage else 0,
                output_tokens=usage.completion_tokens if usage else 0,
                total_tokens=usage.total_tokens if usage else 0,
                requests=1,
            ),
        )


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
