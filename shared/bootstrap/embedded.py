"""The embedded family: every port on one local SQLite file, no account needed."""

from __future__ import annotations

from functools import cached_property

from shared.adapters.embedded.api_key_store import SqliteApiKeyStore
from shared.adapters.embedded.assignment_store import (
    SqliteAssignmentStore,
    SqliteJobBatch,
    SqliteTally,
)
from shared.adapters.embedded.blob_store import FileBlobStore
from shared.adapters.embedded.budget_store import SqliteBudgetStore
from shared.adapters.embedded.context_cache_records import SqliteContextCacheRecords
from shared.adapters.embedded.erasure import SqliteJobEraser
from shared.adapters.embedded.event_publisher import SqliteEventPublisher
from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.lti_store import SqliteLtiStore
from shared.adapters.embedded.processed_events import SqliteProcessedEvents
from shared.adapters.embedded.review_store import SqliteReviewQueue
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.adapters.embedded.task_queue import SqliteTaskQueue
from shared.adapters.embedded.unit_of_work import SqliteUnitOfWork
from shared.adapters.embedded.upload_quota import SqliteUploadQuota
from shared.adapters.embedded.upload_references import SqliteUploadReferences
from shared.adapters.embedded.webhook_secret_store import SqliteWebhookSecretStore
from shared.clock import SystemClock
from shared.config.settings import Settings
from shared.ports import Clock, EventRecords


class EmbeddedFamily:
    """Builds the SQLite adapters on first use; they share one database object."""

    #: Tasks are rows in the same file: made one after another inside the batch's commit.
    enqueue_parallelism = 1

    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    @cached_property
    def _db(self) -> SqliteDatabase:
        return SqliteDatabase(self._settings.database_path, self._settings.store_wait_s)

    def job_store(self) -> SqliteJobStore:
        # Each job write moves its assignment's tally in the same transaction.
        return SqliteJobStore(self._db, on_write=SqliteTally(self._db).record)

    def assignment_store(self) -> SqliteAssignmentStore:
        return SqliteAssignmentStore(self._db)

    def job_eraser(self) -> SqliteJobEraser:
        return SqliteJobEraser(self._db)

    def upload_references(self) -> SqliteUploadReferences:
        return SqliteUploadReferences(self._db)

    def upload_quota(self) -> SqliteUploadQuota:
        return SqliteUploadQuota(self._db)

    def budget_store(self) -> SqliteBudgetStore:
        return SqliteBudgetStore(self._db)

    def context_cache_records(self) -> SqliteContextCacheRecords:
        return SqliteContextCacheRecords(self._db)

    def review_queue(self) -> SqliteReviewQueue:
        return SqliteReviewQueue(self._db)

    def job_batch(self) -> SqliteJobBatch:
        return SqliteJobBatch(self._db, self.job_store())

    def task_queue(self) -> SqliteTaskQueue:
        queue = self._settings.queue_config()
        # Relative to the worker: the dispatcher adds the worker's current base URL.
        return SqliteTaskQueue(self._db, queue, queue.target_path, lanes=self._settings.queues())

    def api_key_store(self) -> SqliteApiKeyStore:
        return SqliteApiKeyStore(self._db)

    def webhook_secret_store(self) -> SqliteWebhookSecretStore:
        return SqliteWebhookSecretStore(self._db)

    def lti_store(self) -> SqliteLtiStore:
        return SqliteLtiStore(self._db)

    def event_publisher(self) -> SqliteEventPublisher:
        return SqliteEventPublisher(self._db)

    def blob_store(self, clock: Clock | None = None) -> FileBlobStore:
        """Files under the data dir; `clock` checks the signed URLs' expiry."""
        s = self._settings
        secret = s.upload_signing_key.get_secret_value()
        key = bytes.fromhex(secret) if secret else s.data_dir / "upload-signing.key"
        return FileBlobStore(s.data_dir / "uploads", key, clock or SystemClock())

    def unit_of_work(self) -> SqliteUnitOfWork:
        return SqliteUnitOfWork(self._db)

    def processed_events(self) -> SqliteProcessedEvents:
        return self._processed

    def event_records(self) -> EventRecords:
        return self._processed

    @cached_property
    def _processed(self) -> SqliteProcessedEvents:
        return SqliteProcessedEvents(self._db)
