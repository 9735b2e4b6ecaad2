"""PubSubEventPublisher on the official Pub/Sub emulator: pull, push and dead-lettering."""

from __future__ import annotations

import concurrent.futures
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from google.api_core import exceptions as gexc
from google.cloud.pubsub_v1 import types

from shared.adapters.google import metering
from shared.adapters.google.event_publisher import PubSubEventPublisher
from shared.codecs.cloudevent import EVENT_TYPE, from_pubsub
from shared.codecs.push_envelope import from_push_envelope
from shared.domain.errors import DependencyUnavailable
from shared.domain.events import GradingCompleted
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest, Job, JobError
from tests.google_fixtures import (
    PROJECT,
    GoogleEventBusHarness,
    PubSubClients,
    create_pull_subscription,
    create_topic,
)
from tests.support.http_target import RecordingTarget, replies

pytestmark = pytest.mark.emulator

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def completed(job_id: str = "j-1", fail: bool = False) -> GradingCompleted:
    request = GradingRequest(submission_id="s-1", answer="a", rubric="r", max_score=10)
    job = Job.new(job_id, "client-a", request, "fp", T0).claim("w", T0, timedelta(minutes=1))
    done = T0 + timedelta(seconds=3)
    if fail:
        job = job.fail("w", JobError("grader-refused", "no"), done)
    else:
        job = job.succeed("w", GradeResult(7.0, 10.0, "ok", (), "rubric"), done)
    return GradingCompleted.from_job(job)


def test_publish_waits_for_the_message_id_and_sends_a_binary_cloudevent(
    google_event_bus_harness: GoogleEventBusHarness,
) -> None:
    event = completed()
    message_id = google_event_bus_harness.publisher.publish(event)
    assert message_id
    [(data, attributes)] = google_event_bus_harness.received(1, timeout=10)
    assert attributes["ce-id"] == event.event_id
    assert attributes["ce-type"] == EVENT_TYPE
    assert attributes["ce-specversion"] == "1.0"
    assert {"ce-source", "ce-time"} <= attributes.keys()
    assert attributes["outcome"] == "succeeded"
    assert json.loads(data)["job_id"] == "j-1"
    assert from_pubsub(data, attributes) == event


def test_republishing_keeps_the_event_id_so_subscribers_can_dedupe(
    google_event_bus_harness: GoogleEventBusHarness,
) -> None:
    publisher = google_event_bus_harness.publisher
    first, second = publisher.publish(completed()), publisher.publish(completed())
    assert first != second  # Pub/Sub's message ids differ...
    messages = google_event_bus_harness.received(2, timeout=10)
    assert {attrs["ce-id"] for _, attrs in messages} == {completed().event_id}  # ...ours not
    assert publisher.meter.snapshot()[metering.PUBSUB_PUBLISHES] == 2


def test_push_subscription_delivers_the_standard_envelope(
    pubsub_clients: PubSubClients, http_receiver: RecordingTarget
) -> None:
    topic = create_topic(pubsub_clients, "grading-completed")
    pubsub_clients.subscriber.create_subscription(
        request={
            "name": pubsub_clients.subscriber.subscription_path(PROJECT, "notification"),
            "topic": topic,
            "push_config": {"push_endpoint": http_receiver.url + "/pubsub/push"},
        }
    )
    event = completed()
    message_id = PubSubEventPublisher(pubsub_clients.publisher, topic, 10.0).publish(event)
    [push] = http_receiver.wait_for(1, timeout=20)
    assert push.path == "/pubsub/push"
    received = from_push_envelope(push.json)
    assert received.event == event
    assert received.message_id == message_id
    assert received.subscription == f"projects/{PROJECT}/subscriptions/notification"


def test_failed_pushes_end_on_the_dead_letter_topic(
    pubsub_clients: PubSubClients, http_receiver: RecordingTarget
) -> None:
    http_receiver.responder = replies(500)
    topic = create_topic(pubsub_clients, "grading-completed")
    dead_topic = create_topic(pubsub_clients, "grading-completed-dead")
    parked = create_pull_subscription(pubsub_clients, dead_topic, "dead-letters")
    pubsub_clients.subscriber.create_subscription(
        request={
            "name": pubsub_clients.subscriber.subscription_path(PROJECT, "notification"),
            "topic": topic,
            "push_config": {"push_endpoint": http_receiver.url + "/pubsub/push"},
            # No retry policy: redelivery "as soon as possible" (~1 s on the emulator);
            # even a 0-1 s backoff policy doubles this test's runtime.
            "dead_letter_policy": types.DeadLetterPolicy(
                dead_letter_topic=dead_topic, max_delivery_attempts=5
            ),
        }
    )
    event = completed()
    PubSubEventPublisher(pubsub_clients.publisher, topic, 10.0).publish(event)
    [(data, attributes)] = parked.received(1, timeout=60)
    assert attributes["ce-id"] == event.event_id and from_pubsub(data, attributes) == event
    assert attributes["CloudPubSubDeadLetterSourceDeliveryCount"] == "5"
    pushes = http_receiver.received_exactly(5, timeout=1)  # max_delivery_attempts pushes
    # The emulator omits the envelope's deliveryAttempt (Pub/Sub sends it with a
    # dead-letter policy); the parser treats it as optional.
    assert all(from_push_envelope(p.json).event == event for p in pushes)


def test_publish_to_a_missing_topic_is_dependency_unavailable(
    pubsub_clients: PubSubClients,
) -> None:
    topic = pubsub_clients.publisher.topic_path(PROJECT, "no-such-topic")
    publisher = PubSubEventPublisher(pubsub_clients.publisher, topic, 10.0)
    with pytest.raises(DependencyUnavailable):
        publisher.publish(completed())
    with pytest.raises(DependencyUnavailable):
        publisher.ping()


def test_ping_passes_when_the_topic_exists(
    google_event_bus_harness: GoogleEventBusHarness,
) -> None:
    google_event_bus_harness.publisher.ping()


def test_topology_from_subscriptions_json_is_created_idempotently(
    pubsub_clients: PubSubClients, http_receiver: RecordingTarget
) -> None:
    from localcloud.topology import create_pubsub_topology
    from shared.config.subscriptions import load_subscriptions

    config = load_subscriptions()
    endpoints = {name: f"{http_receiver.url}/{name}/pubsub/push" for name in config.subscriptions}
    args = (pubsub_clients.publisher, pubsub_clients.subscriber, PROJECT, config, endpoints)
    names = create_pubsub_topology(*args)
    assert create_pubsub_topology(*args) == names  # a second run changes nothing
    notification = pubsub_clients.subscriber.get_subscription(subscription=names["notification"])
    assert notification.push_config.push_endpoint == endpoints["notification"]
    assert notification.dead_letter_policy.dead_letter_topic == names["dead_letter_topic"]
    assert notification.dead_letter_policy.max_delivery_attempts == 10
    assert notification.retry_policy.minimum_backoff == timedelta(seconds=10)
    notification_filter = config.subscriptions["notification"].filter
    assert notification_filter is not None
    assert notification.filter == notification_filter.expression
    PubSubEventPublisher(pubsub_clients.publisher, names["topic"], 10.0).publish(completed())
    paths = sorted(r.path for r in http_receiver.wait_for(2, timeout=20))
    # The emulator pushes the filtered-out event too (see the test below).
    assert paths == ["/analytics/pubsub/push", "/notification/pubsub/push"]


def test_the_emulator_keeps_a_filter_but_delivers_what_it_does_not_admit(
    pubsub_clients: PubSubClients,
) -> None:
    """Pins the emulator's limit: Pub/Sub would deliver only b"admitted" here.

    So on the google-emulators backend notification still receives events without a
    callback URL and records them as before (docs/local.md); the embedded bus and
    Pub/Sub do not deliver them.
    """
    from shared.config.subscriptions import load_subscriptions

    expression = load_subscriptions().subscriptions["notification"].filter
    assert expression is not None
    topic = create_topic(pubsub_clients, "filter-probe")
    path = pubsub_clients.subscriber.subscription_path(PROJECT, "filter-probe-notification")
    pubsub_clients.subscriber.create_subscription(
        request={"name": path, "topic": topic, "filter": expression.expression}
    )
    assert pubsub_clients.subscriber.get_subscription(subscription=path).filter == (
        expression.expression
    )
    pubsub_clients.publisher.publish(topic, b"refused", has_callback="false").result(timeout=10)
    pubsub_clients.publisher.publish(topic, b"admitted", has_callback="true").result(timeout=10)
    received: list[bytes] = []
    for _ in range(10):
        if len(received) >= 2:
            break
        reply = pubsub_clients.subscriber.pull(subscription=path, max_messages=10, timeout=5)
        received += [m.message.data for m in reply.received_messages]
    assert sorted(received) == [b"admitted", b"refused"]


class _StuckFuture:
    def result(self, timeout: float) -> str:
        raise concurrent.futures.TimeoutError


# google-api-core's exceptions take unannotated arguments; their constructors as used here.
service_unavailable: Callable[[str], gexc.ServiceUnavailable] = gexc.ServiceUnavailable
permission_denied: Callable[[str], gexc.PermissionDenied] = gexc.PermissionDenied


class _FakeClient:
    """Stands in for PublisherClient where the emulator cannot act out a failure."""

    def __init__(self, get_topic_error: Exception) -> None:
        self.get_topic_error = get_topic_error

    def publish(self, topic: str, data: bytes, **attributes: str) -> _StuckFuture:
        return _StuckFuture()

    def get_topic(self, **kwargs: object) -> None:
        raise self.get_topic_error


def test_an_unconfirmed_publish_is_dependency_unavailable() -> None:
    client: Any = _FakeClient(service_unavailable("down"))
    publisher = PubSubEventPublisher(client, "projects/p/topics/t", timeout_s=0.01)
    with pytest.raises(DependencyUnavailable, match="not confirmed"):
        publisher.publish(completed())
    with pytest.raises(DependencyUnavailable):
        publisher.ping()


def test_ping_counts_permission_denied_as_reachable() -> None:
    client: Any = _FakeClient(permission_denied("publisher role only"))
    PubSubEventPublisher(client, "projects/p/topics/t", timeout_s=1).ping()
