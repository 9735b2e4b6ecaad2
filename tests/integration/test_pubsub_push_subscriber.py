"""A real subscriber app behind a push subscription of the official Pub/Sub emulator.

The analytics app (Google adapters: FirestoreProcessedEvents on the Firestore emulator)
receives the envelope exactly as Pub/Sub pushes it, records the event durably, and only
then answers 2xx; a republished event is deduplicated on its stable id.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest
from pydantic import SecretStr
from werkzeug.serving import make_server

from services.analytics.app import create_app
from shared.adapters.google.event_publisher import PubSubEventPublisher
from shared.adapters.google.processed_events import FirestoreProcessedEvents
from shared.config.settings import Settings
from tests.google_fixtures import PROJECT, PubSubClients, create_topic
from tests.integration.test_pubsub_publisher import completed

pytestmark = pytest.mark.emulator

PUSH_TOKEN = "local-push-token"


class BearerShim:
    """Adds the bearer token Pub/Sub would send (the emulator sends none) and logs statuses."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.statuses: list[int] = []

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        environ["HTTP_AUTHORIZATION"] = f"Bearer {PUSH_TOKEN}"

        def recording(status: str, headers: list[tuple[str, str]], *exc: Any) -> Any:
            self.statuses.append(int(status.split()[0]))
            return start_response(status, headers, *exc)

        response: Iterable[bytes] = self.app(environ, recording)
        return response


@pytest.fixture
def analytics_endpoint(
    google_processed_events: FirestoreProcessedEvents,
) -> Iterator[tuple[str, BearerShim]]:
    settings = Settings(push_token=SecretStr(PUSH_TOKEN))
    shim = BearerShim(create_app(settings, google_processed_events))
    server = make_server("127.0.0.1", 0, shim, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", shim
    finally:
        server.shutdown()
        thread.join(timeout=5)


def wait_for(check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.1)


def test_pushed_event_is_recorded_once_before_the_2xx(
    pubsub_clients: PubSubClients,
    google_processed_events: FirestoreProcessedEvents,
    firestore_clean: Any,
    analytics_endpoint: tuple[str, BearerShim],
) -> None:
    url, shim = analytics_endpoint
    topic = create_topic(pubsub_clients, "grading-completed")
    pubsub_clients.subscriber.create_subscription(
        request={
            "name": pubsub_clients.subscriber.subscription_path(PROJECT, "analytics"),
            "topic": topic,
            "push_config": {"push_endpoint": url + "/pubsub/push"},
        }
    )
    publisher = PubSubEventPublisher(pubsub_clients.publisher, topic, 10.0)
    event = completed()
    publisher.publish(event)
    wait_for(lambda: 204 in shim.statuses, timeout=20)
    # The 204 was sent after the record was stored.
    doc = firestore_clean.collection("processed_events").document(f"analytics:{event.event_id}")
    record = doc.get().to_dict()["record"]
    assert record["job_id"] == "j-1" and record["outcome"] == "succeeded"
    assert record["publish_time"] is not None  # taken from the real envelope

    publisher.publish(event)  # a duplicate publish: new message id, same event id
    wait_for(lambda: len(shim.statuses) >= 2, timeout=20)
    assert shim.statuses == [204, 204]
    assert google_processed_events.add("analytics", event.event_id, {}) is False
