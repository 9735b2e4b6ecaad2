"""The composition root: build the adapters the settings ask for.

Clients are built here, when an app factory runs, never at import time.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.ports import EventPublisher, JobStore, ProcessedEvents, TaskQueue
from shared.settings import Backend, Settings


@dataclass(frozen=True)
class Adapters:
    """The adapters one process uses."""

    store: JobStore
    queue: TaskQueue
    publisher: EventPublisher
    processed: ProcessedEvents


def build_adapters(settings: Settings) -> Adapters:
    """Build the embedded or the Google Cloud adapters."""
    if settings.backend is Backend.GOOGLE:
        from shared.adapters.google.factory import build_google_adapters

        return build_google_adapters(settings)
    from shared.adapters.embedded.factory import build_embedded_adapters

    return build_embedded_adapters(settings)
