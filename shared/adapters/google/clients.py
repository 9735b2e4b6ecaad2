"""The official clients the Google adapters are handed, configured for Gradeq.

`CLOUD_TASKS_EMULATOR_HOST` points the Cloud Tasks client at any server speaking the
Cloud Tasks v2 gRPC API (such as the local dispatcher); the Firestore and Pub/Sub
clients read their own emulator variables.
"""

from __future__ import annotations

import os

import grpc
from google.api_core import retry as gretry
from google.cloud import tasks_v2
from google.cloud.pubsub_v1 import PublisherClient
from google.cloud.pubsub_v1.types import BatchSettings
from google.cloud.tasks_v2.services.cloud_tasks.transports.grpc import CloudTasksGrpcTransport

CLOUD_TASKS_HOST_ENV = "CLOUD_TASKS_EMULATOR_HOST"
#: How long one store call may take, retries included, before the caller answers 503.
DEFAULT_DEADLINE_S = 10.0

#: A worker thread publishes about one event per job and then waits for it, so a batch
#: only ever holds what concurrent threads of one instance publish within a few ms.
#: 10 ms bounds the added latency; sharing a request lowers the bill (>= 1 KB each).
BATCH_SETTINGS = BatchSettings(max_messages=50, max_bytes=1_000_000, max_latency=0.01)

# Reconnect quickly after an outage of a local server (gRPC's default backoff grows to
# minutes and delays the first call after the server is back by ~15 s).
_LOCAL_CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.min_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 1000),
]


def bounded_retry(deadline_s: float) -> gretry.Retry:
    """Retry transient errors (UNAVAILABLE, 429, 500) for at most `deadline_s` in all.

    The client libraries' defaults retry an unreachable service for a minute or more,
    which would hold a request thread that long; callers answer 503 instead.
    """
    return gretry.Retry(
        predicate=gretry.if_transient_error,
        initial=0.1,
        maximum=1.0,
        multiplier=2.0,
        timeout=deadline_s,
    )


def cloud_tasks_client(emulator_host: str | None = None) -> tasks_v2.CloudTasksClient:
    """A Cloud Tasks client; over an insecure channel when an emulator host is given."""
    host = emulator_host or os.environ.get(CLOUD_TASKS_HOST_ENV)
    if not host:
        return tasks_v2.CloudTasksClient()
    channel = grpc.insecure_channel(host, options=_LOCAL_CHANNEL_OPTIONS)
    return tasks_v2.CloudTasksClient(transport=CloudTasksGrpcTransport(channel=channel))


def queue_path(project_id: str, location: str, queue: str) -> str:
    """The full resource name of a queue."""
    return tasks_v2.CloudTasksClient.queue_path(project_id, location, queue)


def publisher_client() -> PublisherClient:
    """A PublisherClient with Gradeq's batching (honours PUBSUB_EMULATOR_HOST)."""
    return PublisherClient(batch_settings=BATCH_SETTINGS)
