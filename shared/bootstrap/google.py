"""The Google Cloud family: Firestore, Cloud Tasks and Pub/Sub through the official clients.

Emulators are honoured through the standard variables: `FIRESTORE_EMULATOR_HOST` and
`PUBSUB_EMULATOR_HOST` (read by the client libraries themselves) and
`CLOUD_TASKS_EMULATOR_HOST` (read in `shared.adapters.google.clients`), and
`STORAGE_EMULATOR_HOST` (the storage client's own).
"""

from __future__ import annotations

import os
from datetime import timedelta
from functools import cached_property

import google.cloud.storage as storage  # untyped: no py.typed
from google.cloud import firestore, tasks_v2
from google.cloud.pubsub_v1 import PublisherClient

from shared.adapters.google.api_key_store import FirestoreApiKeyStore
from shared.adapters.google.assignment_store import FirestoreAssignmentStore, FirestoreTally
from shared.adapters.google.blob_store import GcsBlobStore
from shared.adapters.google.budget_store import FirestoreBudgetStore
from shared.adapters.google.clients import cloud_tasks_client, publisher_client, queue_path
from shared.adapters.google.context_cache_records import FirestoreContextCacheRecords
from shared.adapters.google.erasure import FirestoreJobEraser
from shared.adapters.google.event_publisher import PubSubEventPublisher
from shared.adapters.google.job_batch import FirestoreJobBatch
from shared.adapters.google.job_store import FirestoreJobStore
from shared.adapters.google.lti_store import FirestoreLtiStore
from shared.adapters.google.processed_events import FirestoreProcessedEvents
from shared.adapters.google.review_store import FirestoreReviewQueue
from shared.adapters.google.task_queue import CloudTasksQueue
from shared.adapters.google.unit_of_work import SeparateCommits
from shared.adapters.google.upload_quota import FirestoreUploadQuota
from shared.adapters.google.upload_references import FirestoreUploadReferences
from shared.adapters.google.webhook_secret_store import FirestoreWebhookSecretStore
from shared.config.settings import Settings
from shared.ports import Clock

#: How long the worker waits for Pub/Sub to confirm a publish before it gives up (and
#: lets Cloud Tasks retry the job); well inside the task's dispatch deadline.
PUBLISH_TIMEOUT_S = 30.0
#: The collections of assignments, their rounds' tally shards and AssignmentGraded records.
ASSIGNMENTS = "assignments"
ASSIGNMENT_TALLIES = "assignment_tallies"
ASSIGNMENT_GRADED = "assignment_graded"
#: Each client's upload bytes of the day (one document per client).
UPLOAD_QUOTA = "upload_quota"
#: The prefix of the budget collections (budgets, charges, monthly and daily spend).
BUDGET = "budget"
#: One record per explicit provider context cache (shared/adapters/graders/gemini_cache.py).
CONTEXT_CACHES = "context_caches"


class GoogleFamily:
    """Builds each Google adapter on first use; one client per Google API serves them all.

    Each client holds one gRPC channel: asking for an adapter twice never opens another.
    """

    #: Cloud Tasks creations in flight at once for one batch.
    enqueue_parallelism = 16

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._ttl = timedelta(days=settings.job_ttl_days)

    @cached_property
    def _firestore(self) -> firestore.Client:
        s = self._settings
        return firestore.Client(project=s.project_id, database=s.firestore_database)

    def job_store(self) -> FirestoreJobStore:
        s = self._settings
        return FirestoreJobStore(
            self._firestore,
            s.jobs_collection,
            self._ttl,
            s.firestore_deadline_s,
            counters_collection=s.counters_collection,
            on_write=self._tally.record,
        )

    @cached_property
    def _tally(self) -> FirestoreTally:
        return FirestoreTally(self._firestore, ASSIGNMENT_TALLIES)

    def assignment_store(self) -> FirestoreAssignmentStore:
        return FirestoreAssignmentStore(
            self._firestore,
            ASSIGNMENTS,
            ASSIGNMENT_TALLIES,
            ASSIGNMENT_GRADED,
            self._settings.firestore_deadline_s,
        )

    def job_eraser(self) -> FirestoreJobEraser:
        s = self._settings
        return FirestoreJobEraser(
            self._firestore,
            s.jobs_collection,
            ASSIGNMENT_TALLIES,
            s.processed_events_collection,
            s.firestore_deadline_s,
            self._ttl,
        )

    def upload_references(self) -> FirestoreUploadReferences:
        s = self._settings
        return FirestoreUploadReferences(self._firestore, s.jobs_collection, s.firestore_deadline_s)

    def upload_quota(self) -> FirestoreUploadQuota:
        return FirestoreUploadQuota(
            self._firestore, UPLOAD_QUOTA, self._settings.firestore_deadline_s
        )

    def budget_store(self) -> FirestoreBudgetStore:
        return FirestoreBudgetStore(self._firestore, BUDGET, self._settings.firestore_deadline_s)

    def context_cache_records(self) -> FirestoreContextCacheRecords:
        return FirestoreContextCacheRecords(
            self._firestore, CONTEXT_CACHES, self._settings.firestore_deadline_s
        )

    def review_queue(self) -> FirestoreReviewQueue:
        s = self._settings
        return FirestoreReviewQueue(self._firestore, s.jobs_collection, s.firestore_deadline_s)

    def job_batch(self) -> FirestoreJobBatch:
        s = self._settings
        return FirestoreJobBatch(
            self._firestore,
            self.job_store(),
            self._tally,
            s.jobs_collection,
            s.counters_collection,
            self._ttl,
        )

    @cached_property
    def _cloud_tasks(self) -> tasks_v2.CloudTasksClient:
        return cloud_tasks_client()

    @cached_property
    def _publisher(self) -> PublisherClient:
        return publisher_client()

    def task_queue(self) -> CloudTasksQueue:
        s = self._settings
        worker_url = s.worker_url.rstrip("/")
        queue = s.queue_config()
        return CloudTasksQueue(
            self._cloud_tasks,
            queue_path(s.project_id, s.location, s.queue),
            target_url=worker_url + queue.target_path,
            queue=queue,
            service_account=s.tasks_service_account,
            audience=worker_url,
            lanes=s.queues(),
        )

    def api_key_store(self) -> FirestoreApiKeyStore:
        s = self._settings
        return FirestoreApiKeyStore(self._firestore, s.api_keys_collection, s.firestore_deadline_s)

    def webhook_secret_store(self) -> FirestoreWebhookSecretStore:
        s = self._settings
        return FirestoreWebhookSecretStore(
            self._firestore, s.webhook_secrets_collection, s.firestore_deadline_s
        )

    def lti_store(self) -> FirestoreLtiStore:
        s = self._settings
        return FirestoreLtiStore(
            self._firestore,
            s.lti_registrations_collection,
            s.lti_keys_collection,
            s.lti_links_collection,
            s.firestore_deadline_s,
        )

    def event_publisher(self) -> PubSubEventPublisher:
        client = self._publisher
        return PubSubEventPublisher(
            client,
            client.topic_path(self._settings.project_id, self._settings.topic),
            timeout_s=PUBLISH_TIMEOUT_S,
        )

    @cached_property
    def _storage(self) -> storage.Client:
        return storage.Client(project=self._settings.project_id)

    def blob_store(self, clock: Clock | None = None) -> GcsBlobStore:
        """The uploads bucket (Cloud Storage checks the signed URLs: `clock` is unused)."""
        s = self._settings
        # The client library honours STORAGE_EMULATOR_HOST; signed URLs point there too.
        emulator = os.environ.get("STORAGE_EMULATOR_HOST") or None
        signing = None
        if s.upload_signing_key_file:  # emulator runs: no IAM to sign through
            from google.oauth2 import service_account

            signing = service_account.Credentials.from_service_account_file(  # type: ignore[no-untyped-call]
                str(s.upload_signing_key_file)
            )
        return GcsBlobStore(
            lambda: self._storage,
            s.uploads_bucket or f"{s.project_id}-gradeq-uploads",
            signer_email=s.upload_signer_email,
            signing_credentials=signing,
            api_access_endpoint=emulator,
        )

    def unit_of_work(self) -> SeparateCommits:
        return SeparateCommits()

    def processed_events(self) -> FirestoreProcessedEvents:
        return self._processed

    def event_records(self) -> FirestoreProcessedEvents:
        return self._processed

    @cached_property
    def _processed(self) -> FirestoreProcessedEvents:
        s = self._settings
        return FirestoreProcessedEvents(
            self._firestore, s.processed_events_collection, self._ttl, s.firestore_deadline_s
        )
