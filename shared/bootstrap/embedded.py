"""The embedded family: every port on one local SQLite file, no account needed."""

from __future__ import annotations

from functools import cached_property

from shared.adapters.embedded.api_key_store import SqliteApiKeyStore
from shared.adapters.embedded.event_publisher import SqliteEventPublisher
from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.processed_events import SqliteProcessedEvents
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.adapters.embedded.task_queue import SqliteTaskQueue
from shared.adapters.embedded.unit_of_work import SqliteUnitOfWork
from shared.adapters.embedded.webhook_secret_store import SqliteWebhookSecretStore
from shared.config.settings import Settings
from shared.ports import EventRecords


class EmbeddedFamily:
    """Builds the SQLite adapters on first use; they share one database object."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    @cached_property
    def _db(self) -> SqliteDatabase:
        return SqliteDatabase(self._settings.database_path, self._settings.store_wait_s)

    def job_store(self) -> SqliteJobStore:
        return SqliteJobStore(self._db)

    def task_queue(self) -> SqliteTaskQueue:
        queue = self._settings.queue_config()
        # Relative to the worker: the dispatcher adds the worker's current base URL.
        return SqliteTaskQueue(self._db, queue, queue.target_path, lanes=self._settings.queues())

    def api_key_store(self) -> SqliteApiKeyStore:
        return SqliteApiKeyStore(self._db)

    def webhook_secret_store(self) -> SqliteWebhookSecretStore:
        return SqliteWebhookSecretStore(self._db)

    def event_publisher(self) -> SqliteEventPublisher:
        return SqliteEventPublisher(self._db)

    def unit_of_work(self) -> SqliteUnitOfWork:
        return SqliteUnitOfWork(self._db)

    def processed_events(self) -> SqliteProcessedEvents:
        return self._processed

    def event_records(self) -> EventRecords:
        return self._processed

    @cached_property
    def _processed(self) -> SqliteProcessedEvents:
        return SqliteProcessedEvents(self._db)
