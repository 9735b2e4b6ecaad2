"""Fixtures that run the Google adapters against the official emulators and the local dispatcher.

The Firestore and Pub/Sub emulators start once per session on free ports and are
stopped at the end; data is reset before each test. Without java or the emulator jars
the tests that need them skip, naming what is missing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from localcloud import emulators
from tests.support.http_target import ReceivedRequest, RecordingTarget, replies

PROJECT = "demo-gradeq"  # "demo-" projects never reach real Google Cloud
LOCATION = "europe-west1"
JOB_TTL = timedelta(days=30)


def _skip_without(name: str) -> None:
    reason = emulators.missing_reason(name)
    if reason is not None:
        pytest.skip(f"Google Cloud emulators unavailable: {reason}")


@contextmanager
def _emulator_env(name: str, host: str) -> Iterator[None]:
    """Set `name=host` while clients are built (they read it in their constructors)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(name, host)
        yield


# --- a local HTTP target for pushes and tasks ----------------------------------------


@pytest.fixture
def http_receiver() -> Iterator[RecordingTarget]:
    """A local recording HTTP target answering 204 (set `.responder` to change)."""
    with RecordingTarget(replies(204)) as receiver:
        yield receiver


# --- Firestore -----------------------------------------------------------------------


@pytest.fixture(scope="session")
def firestore_emulator() -> Iterator[str]:
    """The official Firestore emulator's host:port, for the whole session."""
    _skip_without("firestore")
    emulator = emulators.start_firestore(PROJECT)
    try:
        yield emulator.host
    finally:
        emulator.stop()


@pytest.fixture(scope="session")
def firestore_client(firestore_emulator: str) -> Iterator[Any]:
    """One Firestore client on the emulator for the session."""
    from google.cloud import firestore

    with _emulator_env(emulators.FIRESTORE_HOST_ENV, firestore_emulator):
        client = firestore.Client(project=PROJECT)
    yield client
    close: Callable[[], None] = client.close  # google-cloud-core's, unannotated
    close()


@pytest.fixture
def firestore_clean(firestore_emulator: str, firestore_client: Any) -> Any:
    """The Firestore client, with every document of the emulator deleted first."""
    from shared.adapters.key_cache import FOUND_KEYS

    emulators.reset_firestore(firestore_emulator, PROJECT)
    FOUND_KEYS.clear()  # nothing this process remembers of the records outlives them
    return firestore_client


@pytest.fixture
def firestore_job_store(firestore_clean: Any) -> Any:
    """A FirestoreJobStore on an empty emulator database."""
    from shared.adapters.google.job_store import FirestoreJobStore

    return FirestoreJobStore(firestore_clean, "grading_jobs", JOB_TTL)


@pytest.fixture
def google_processed_events(firestore_clean: Any) -> Any:
    """A FirestoreProcessedEvents on an empty emulator database."""
    from shared.adapters.google.processed_events import FirestoreProcessedEvents

    return FirestoreProcessedEvents(firestore_clean, "processed_events", JOB_TTL)


@pytest.fixture
def google_api_key_store(firestore_clean: Any) -> Any:
    """A FirestoreApiKeyStore on an empty emulator database."""
    from shared.adapters.google.api_key_store import FirestoreApiKeyStore

    return FirestoreApiKeyStore(firestore_clean, "api_keys")


# --- Pub/Sub -------------------------------------------------------------------------


@pytest.fixture(scope="session")
def pubsub_emulator() -> Iterator[str]:
    """The official Pub/Sub emulator's host:port, for the whole session."""
    _skip_without("pubsub")
    emulator = emulators.start_pubsub()
    try:
        yield emulator.host
    finally:
        emulator.stop()


@dataclass
class PubSubClients:
    """Clients bound to the emulator."""

    publisher: Any
    subscriber: Any


@pytest.fixture(scope="session")
def pubsub_session_clients(pubsub_emulator: str) -> Iterator[PubSubClients]:
    from google.cloud import pubsub_v1

    from shared.adapters.google.clients import publisher_client

    with _emulator_env(emulators.PUBSUB_HOST_ENV, pubsub_emulator):
        clients = PubSubClients(publisher_client(), pubsub_v1.SubscriberClient())
    yield clients
    clients.publisher.stop()
    clients.subscriber.close()


@pytest.fixture
def pubsub_clients(pubsub_emulator: str, pubsub_session_clients: PubSubClients) -> PubSubClients:
    """The emulator's clients, with every topic and subscription deleted first."""
    emulators.reset_pubsub(pubsub_emulator)
    return pubsub_session_clients


class PullSubscription:
    """A pull subscription used to assert what was published."""

    def __init__(self, subscriber: Any, path: str) -> None:
        self.subscriber = subscriber
        self.path = path

    def received(self, n: int, timeout: float) -> list[tuple[bytes, dict[str, str]]]:
        """Pull and ack until `n` messages arrived (fails the test on timeout)."""
        got: list[tuple[bytes, dict[str, str]]] = []
        deadline = time.monotonic() + timeout
        while len(got) < n and time.monotonic() < deadline:
            response = self.subscriber.pull(
                subscription=self.path, max_messages=n - len(got), timeout=5.0
            )
            if not response.received_messages:
                time.sleep(0.1)
                continue
            for item in response.received_messages:
                got.append((item.message.data, dict(item.message.attributes)))
            self.subscriber.acknowledge(
                subscription=self.path, ack_ids=[m.ack_id for m in response.received_messages]
            )
        if len(got) < n:
            pytest.fail(f"pulled {len(got)} of {n} messages from {self.path} within {timeout}s")
        return got


def create_topic(clients: PubSubClients, topic_id: str) -> str:
    path: str = clients.publisher.topic_path(PROJECT, topic_id)
    clients.publisher.create_topic(name=path)
    return path


def create_pull_subscription(clients: PubSubClients, topic: str, sub_id: str) -> PullSubscription:
    path = clients.subscriber.subscription_path(PROJECT, sub_id)
    clients.subscriber.create_subscription(name=path, topic=topic, ack_deadline_seconds=10)
    return PullSubscription(clients.subscriber, path)


@dataclass
class GoogleEventBusHarness:
    """The Pub/Sub publisher under test and a pull subscription on its topic."""

    publisher: Any
    topic_path: str
    subscription: PullSubscription
    clients: PubSubClients

    def received(self, n: int, timeout: float) -> list[tuple[bytes, dict[str, str]]]:
        return self.subscription.received(n, timeout)


@pytest.fixture
def google_event_bus_harness(pubsub_clients: PubSubClients) -> GoogleEventBusHarness:
    """PubSubEventPublisher on a fresh emulator topic, plus a pull subscription on it."""
    from shared.adapters.google.event_publisher import PubSubEventPublisher

    topic = create_topic(pubsub_clients, "grading-completed")
    subscription = create_pull_subscription(pubsub_clients, topic, "assertions")
    publisher = PubSubEventPublisher(pubsub_clients.publisher, topic, timeout_s=10.0)
    return GoogleEventBusHarness(publisher, topic, subscription, pubsub_clients)


# --- Cloud Tasks on the local dispatcher ---------------------------------------------


@dataclass
class GoogleTaskQueueHarness:
    """CloudTasksQueue against the local dispatcher's gRPC API, delivering to `target`."""

    queue: Any
    client: Any
    queue_path: str
    target: RecordingTarget
    dispatcher: Any

    def wait_for_deliveries(self, n: int, timeout: float) -> list[ReceivedRequest]:
        """Wait until the target received at least `n` requests; return them all."""
        return self.target.wait_for(n, timeout)


@contextmanager
def local_dispatcher(db_path: Path, grpc_port: int | None = None) -> Iterator[Any]:
    """Run the project's dispatcher (Cloud Tasks v2 over gRPC) on a SQLite file."""
    from localcloud.tasks.dispatcher import Dispatcher
    from shared.adapters.embedded.sqlite import SqliteDatabase
    from shared.config.queues import load_queues

    port = grpc_port or emulators.free_port()
    dispatcher = Dispatcher(
        SqliteDatabase(db_path), load_queues(), grpc_address=f"127.0.0.1:{port}"
    )
    dispatcher.start()
    try:
        yield dispatcher
    finally:
        dispatcher.stop(grace_s=1.0)


GRADING_QUEUE_PATH = f"projects/{PROJECT}/locations/{LOCATION}/queues/grading"


def cloud_tasks_queue(client: Any, target_url: str, service_account: str = "") -> Any:
    """A CloudTasksQueue for the `grading` queue whose tasks POST to `target_url`."""
    from shared.adapters.google.task_queue import CloudTasksQueue
    from shared.config.queues import load_queues

    config = load_queues()["grading"]
    return CloudTasksQueue(
        client,
        GRADING_QUEUE_PATH,
        target_url=target_url + config.target_path,
        queue=config,
        service_account=service_account,
        audience=target_url,
        lanes=load_queues(),
    )


@pytest.fixture
def google_task_queue_harness(
    tmp_path: Path, http_receiver: RecordingTarget
) -> Iterator[GoogleTaskQueueHarness]:
    """CloudTasksQueue -> local dispatcher (gRPC) -> a local HTTP target answering 204."""
    from shared.adapters.google.clients import cloud_tasks_client

    with local_dispatcher(tmp_path / "tasks.sqlite3") as dispatcher:
        client = cloud_tasks_client(f"127.0.0.1:{dispatcher.grpc_port}")
        adapter = cloud_tasks_queue(client, http_receiver.url)
        yield GoogleTaskQueueHarness(adapter, client, GRADING_QUEUE_PATH, http_receiver, dispatcher)
