"""Provider batches: many gradings in one request at the provider's batch price.

`BatchGrader` renders each job's prompt as the model grader does, hands them to a
`BatchClient` (OpenAI's Batch API over the files endpoint, or Gemini batch mode with
inline requests) and reads the answers back through the same answer check. Each request
is keyed by its job id; a key the answers do not name, or an answer that is unusable,
is an error for that job alone.
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, TypeVar

import openai
from google.genai import Client, types
from openai.types.chat import ChatCompletion

from shared.adapters.graders.gemini import GeminiChat, batch_completion, batch_config
from shared.adapters.graders.gemini import _call as _gemini_call
from shared.adapters.graders.llm import Completion, ModelGrader, error_for_status
from shared.adapters.graders.openai_compat import OpenAICompatChat
from shared.adapters.graders.parts import gemini_contents
from shared.adapters.graders.prompt import RenderedPrompt
from shared.domain.errors import (
    GradingError,
    ProviderRejected,
    ProviderUnavailable,
)
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest

log = logging.getLogger(__name__)
T = TypeVar("T")


class BatchState(StrEnum):
    """Where a provider's batch is, in the terms both providers share."""

    RUNNING = "running"  # validating, queued, in progress, finalizing
    COMPLETED = "completed"
    FAILED = "failed"
    EXPIRED = "expired"
    CANCELLED = "cancelled"

    @property
    def is_final(self) -> bool:
        return self is not BatchState.RUNNING


@dataclass(frozen=True)
class BatchStatus:
    """A batch's state and, once it ended, each request's answer or error by key.

    An expired batch may still hold the answers of the requests it finished.
    """

    state: BatchState
    answers: dict[str, Completion | GradingError] = field(default_factory=dict)


class BatchClient(Protocol):
    """One provider's batch endpoints."""

    provider: str

    def submit(self, prompts: dict[str, object], name: str) -> str:
        """Create a batch of the requests keyed by job id; its provider id."""
        ...

    def status(self, batch_id: str) -> BatchStatus:
        """The batch's state; its answers once it ended."""
        ...

    def request(self, prompt: RenderedPrompt) -> object:
        """One request of a batch, as the provider takes it."""
        ...


class BatchGrader:
    """Grades many requests in one provider batch, with the model grader's prompt and check."""

    def __init__(self, grader: ModelGrader, client: BatchClient) -> None:
        self._grader = grader
        self._client = client
        self.provider = client.provider

    @property
    def model(self) -> ModelGrader:
        """The model grader whose prompt and answer check the batch shares."""
        return self._grader

    def render(self, request: GradingRequest) -> object:
        """One job's request (PromptTooLarge, a permanent error, past the input bound)."""
        return self._client.request(self._grader.render(request))

    def submit(self, requests: dict[str, object], name: str) -> str:
        return self._client.submit(requests, name)

    def status(self, batch_id: str) -> BatchStatus:
        return self._client.status(batch_id)

    def result(self, request: GradingRequest, answer: object) -> GradeResult:
        """The job's result from its answer; the answer's error, or MalformedModelAnswer."""
        if isinstance(answer, GradingError):
            raise answer
        assert isinstance(answer, Completion)
        result = self._grader.result_of(request, self._grader.render(request), answer)
        # Billed at the batch price: the usage says how many of its requests were.
        usage = {**result.usage, "batch_requests": answer.usage.requests}
        return dataclasses.replace(result, usage=usage)


# --- OpenAI --------------------------------------------------------------------------------

#: OpenAI batch statuses still on their way to an end.
_OPENAI_RUNNING = frozenset({"validating", "in_progress", "finalizing", "cancelling"})
_OPENAI_ENDED = {
    "completed": BatchState.COMPLETED,
    "failed": BatchState.FAILED,
    "expired": BatchState.EXPIRED,
    "cancelled": BatchState.CANCELLED,
}
OPENAI_ENDPOINT = "/v1/chat/completions"
#: Error-file codes of requests the batch never ran (it expired or was cancelled first).
_UNSENT = frozenset({"batch_expired", "batch_cancelled"})


class OpenAIBatchClient:
    """OpenAI's Batch API: a JSONL file of chat completion requests, one batch over it."""

    def __init__(self, client: openai.OpenAI, chat: OpenAICompatChat) -> None:
        self.provider = chat.provider
        self._client = client
        self._chat = chat

    def request(self, prompt: RenderedPrompt) -> object:
        return self._chat.body(prompt)

    def submit(self, prompts: dict[str, object], name: str) -> str:
        lines = [
            json.dumps(
                {"custom_id": key, "method": "POST", "url": OPENAI_ENDPOINT, "body": body},
                separators=(",", ":"),
            )
            for key, body in prompts.items()
        ]
        data = ("\n".join(lines) + "\n").encode()

        def create() -> str:
            uploaded = self._client.files.create(
                file=(f"{name}.jsonl", io.BytesIO(data)), purpose="batch"
            )
            batch = self._client.batches.create(
                input_file_id=uploaded.id,
                endpoint="/v1/chat/completions",
                completion_window="24h",
                metadata={"gradeq_batch": name},
            )
            return batch.id

        return _openai_call(create)

    def status(self, batch_id: str) -> BatchStatus:
        batch = _openai_call(lambda: self._client.batches.retrieve(batch_id))
        if batch.status in _OPENAI_RUNNING:
            return BatchStatus(BatchState.RUNNING)
        state = _OPENAI_ENDED.get(batch.status, BatchState.FAILED)
        answers: dict[str, Completion | GradingError] = {}
        for file_id in (batch.output_file_id, batch.error_file_id):
            if file_id:
                answers.update(self._answers(self._file_text(file_id)))
        return BatchStatus(state, answers)

    def _file_text(self, file_id: str) -> str:
        return _openai_call(lambda: self._client.files.content(file_id).text)

    def _answers(self, text: str) -> dict[str, Completion | GradingError]:
        answers: dict[str, Completion | GradingError] = {}
        for line in text.splitlines():
            if not line.strip():
                continue
            item = json.loads(line)
            key = str(item.get("custom_id"))
            response = item.get("response") or {}
            status = int(response.get("status_code") or 0)
            if item.get("error") or status != 200:
                code = (item.get("error") or {}).get("code") or _body_code(response.get("body"))
                if code in _UNSENT:
                    continue  # never sent: the batch's own end says why

                answers[key] = error_for_status(self.provider, status or 500, None, code)
                continue
            try:
                answers[key] = self._chat.read(ChatCompletion.model_validate(response["body"]))
            except GradingError as exc:
                answers[key] = exc
            except (KeyError, ValueError):
                answers[key] = ProviderRejected(f"{self.provider} batch answer unreadable")
        return answers


def _body_code(body: object) -> str | None:
    error = body.get("error") if isinstance(body, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) and code.isidentifier() else None


def _openai_call(call: Callable[[], T]) -> T:
    try:
        return call()
    except openai.APIConnectionError:
        raise ProviderUnavailable("openai-compatible server could not be reached") from None
    except openai.APIStatusError as exc:
        raise error_for_status(
            "openai-compatible", exc.status_code, None, _body_code(exc.body)
        ) from None


# --- Gemini --------------------------------------------------------------------------------

_GEMINI_ENDED = {
    types.JobState.JOB_STATE_SUCCEEDED: BatchState.COMPLETED,
    types.JobState.JOB_STATE_PARTIALLY_SUCCEEDED: BatchState.COMPLETED,
    types.JobState.JOB_STATE_FAILED: BatchState.FAILED,
    types.JobState.JOB_STATE_EXPIRED: BatchState.EXPIRED,
    types.JobState.JOB_STATE_CANCELLED: BatchState.CANCELLED,
}
#: How long one batch call may take.
_GEMINI_TIMEOUT_MS = 60_000


class GeminiBatchClient:
    """Gemini batch mode on the Gemini API: inline requests keyed in their metadata."""

    def __init__(self, client: Client, chat: GeminiChat) -> None:
        self.provider = chat.provider
        self._client = client
        self._chat = chat

    def request(self, prompt: RenderedPrompt) -> object:
        return types.InlinedRequest(
            model=self._chat.model,
            contents=gemini_contents(prompt.user, prompt.attachments),
            config=batch_config(self._chat, prompt),
        )

    def submit(self, prompts: dict[str, object], name: str) -> str:
        requests: list[types.InlinedRequest] = []
        for key, request in prompts.items():
            assert isinstance(request, types.InlinedRequest)
            requests.append(request.model_copy(update={"metadata": {"key": key}}))
        http = types.HttpOptions(timeout=_GEMINI_TIMEOUT_MS)
        job = _gemini_call(
            lambda: self._client.batches.create(
                model=self._chat.model,
                src=types.BatchJobSource(inlined_requests=requests),
                config=types.CreateBatchJobConfig(display_name=name, http_options=http),
            ),
            _GEMINI_TIMEOUT_MS / 1000,
        )
        if not job.name:
            raise ProviderUnavailable("gemini created a batch without a name")
        return job.name

    def status(self, batch_id: str) -> BatchStatus:
        http = types.HttpOptions(timeout=_GEMINI_TIMEOUT_MS)
        job = _gemini_call(
            lambda: self._client.batches.get(
                name=batch_id, config=types.GetBatchJobConfig(http_options=http)
            ),
            _GEMINI_TIMEOUT_MS / 1000,
        )
        state = _GEMINI_ENDED.get(job.state) if job.state is not None else None
        if state is None:
            return BatchStatus(BatchState.RUNNING)
        answers: dict[str, Completion | GradingError] = {}
        for inlined in (job.dest.inlined_responses if job.dest else None) or []:
            key = str((inlined.metadata or {}).get("key"))
            if inlined.error is not None or inlined.response is None:
                code = inlined.error.code if inlined.error is not None else None
                answers[key] = error_for_status(self.provider, int(code or 500), None)
                continue
            try:
                answers[key] = batch_completion(self._chat, inlined.response)
            except GradingError as exc:
                answers[key] = exc
        return BatchStatus(state, answers)
