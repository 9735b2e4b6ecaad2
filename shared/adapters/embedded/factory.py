"""Build the embedded adapters: everything in one local SQLite file, no account needed."""

from __future__ import annotations

from shared.adapters.embedded.event_bus import SqliteEventPublisher
from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.processed_events import SqliteProcessedEvents
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.adapters.embedded.task_queue import SqliteTaskQueue
from shared.bootstrap import Adapters
from shared.settings import Settings


def build_embedded_adapters(settings: Settings) -> Adapters:
    """Open the local database and wire every port to it."""
    db = SqliteDatabase(settings.database_path)
    queue_config = settings.queue_config()
    return Adapters(
        store=SqliteJobStore(db),
        queue=SqliteTaskQueue(
            db, queue_config, settings.worker_url.rstrip("/") + queue_config.target_path
        ),
        publisher=SqliteEventPublisher(db),
        processed=SqliteProcessedEvents(db),
    )
