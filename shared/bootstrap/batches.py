"""Batch mode's provider batches, built from the settings when the worker app is made.

The batch client gets an SDK client of its own (retries off, as the graders'), and the
model grader whose prompt and answer check the batches share. The SDKs are imported here,
not at import time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shared.config.settings import GraderKind, Settings

if TYPE_CHECKING:
    from shared.adapters.graders.provider_batch import BatchGrader


def batch_grader_for(settings: Settings) -> BatchGrader | None:
    """The provider batches of the configured model, when batch mode is on."""
    if not settings.batch_mode:
        return None
    from shared.adapters.graders.gemini import GeminiChat
    from shared.adapters.graders.openai_compat import OpenAICompatChat
    from shared.adapters.graders.provider_batch import (
        BatchClient,
        BatchGrader,
        GeminiBatchClient,
        OpenAIBatchClient,
    )
    from shared.bootstrap.graders import _model_grader, gemini_chat, openai_chat

    chat = gemini_chat(settings) if settings.grader is GraderKind.GEMINI else openai_chat(settings)
    client: BatchClient
    if isinstance(chat, GeminiChat):
        client = GeminiBatchClient(chat.client, chat)
    else:
        assert isinstance(chat, OpenAICompatChat)
        client = OpenAIBatchClient(chat.client, chat)
    return BatchGrader(_model_grader(settings), client)
