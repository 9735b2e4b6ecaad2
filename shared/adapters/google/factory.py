"""Build the Google Cloud adapters from settings (called by the app factories, not at import).

Emulators are honoured through the standard variables: `FIRESTORE_EMULATOR_HOST` and
`PUBSUB_EMULATOR_HOST` (read by the client libraries themselves) and
`CLOUD_TASKS_EMULATOR_HOST` (read here: any server speaking the Cloud Tasks v2 gRPC API,
such as the project's local dispatcher).
"""

from __future__ import annotations

import os
from datetime import timedelta

import grpc
from google.cloud import firestore, tasks_v2
from google.cloud.tasks_v2.services.cloud_tasks.transports.grpc import CloudTasksGrpcTransport

from shared.adapters.google.cloud_tasks_queue import CloudTasksQueue
from shared.adapters.google.firestore_processed import FirestoreProcessedEvents
from shared.adapters.google.firestore_store import FirestoreJobStore
from shared.adapters.google.pubsub_publisher import PubSubEventPublisher, publisher_client
from shared.bootstrap import Adapters
from shared.settings import Settings

CLOUD_TASKS_HOST_ENV = "CLOUD_TASKS_EMULATOR_HOST"
PROCESSED_EVENTS_COLLECTION = "processed_events"
#: How long the worker waits for Pub/Sub to confirm a publish before it gives up (and
#: lets Cloud Tasks retry the job); well inside the task's dispatch deadline.
PUBLISH_TIMEOUT_S = 30.0

# Reconnect quickly after an outage of a local server (gRPC's default backoff grows to
# minutes and delays the first call after the server is back by ~15 s).
_LOCAL_CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.min_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 1000),
]


def cloud_tasks_client(emulator_host: str | None = None) -> tasks_v2.CloudTasksClient:
    """A Cloud Tasks client; over an insecure channel when an emulator host is given."""
    host = emulator_host or os.environ.get(CLOUD_TASKS_HOST_ENV)
    if not host:
        return tasks_v2.CloudTasksClient()
    channel = grpc.insecure_channel(host, options=_LOCAL_CHANNEL_OPTIONS)
    return tasks_v2.CloudTasksClient(transport=CloudTasksGrpcTransport(channel=channel))


def queue_path(settings: Settings) -> str:
    """The full resource name of the grading queue."""
    return tasks_v2.CloudTasksClient.queue_path(
        settings.project_id, settings.location, settings.queue
    )


def build_google_adapters(settings: Settings) -> Adapters:
    """Build clients and adapters for Firestore, Cloud Tasks and Pub/Sub."""
    ttl = timedelta(days=settings.job_ttl_days)
    db = firestore.Client(project=settings.project_id, database=settings.firestore_database)
    publisher = publisher_client()
    worker_url = settings.worker_url.rstrip("/")
    queue_config = settings.queue_config()
    return Adapters(
        store=FirestoreJobStore(db, settings.jobs_collection, ttl),
        queue=CloudTasksQueue(
            cloud_tasks_client(),
            queue_path(settings),
            target_url=worker_url + queue_config.target_path,
            queue=queue_config,
            service_account=settings.tasks_service_account,
            audience=worker_url,
        ),
        publisher=PubSubEventPublisher(
            publisher,
            publisher.topic_path(settings.project_id, settings.topic),
            timeout_s=PUBLISH_TIMEOUT_S,
        ),
        processed=FirestoreProcessedEvents(db, PROCESSED_EVENTS_COLLECTION, ttl),
    )
