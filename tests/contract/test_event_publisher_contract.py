"""EventPublisher contract: the SQLite outbox and Pub/Sub publish the same messages."""

from __future__ import annotations

import json

from shared.codecs.cloudevent import EVENT_SOURCE, EVENT_TYPE, from_pubsub
from shared.codecs.event_schema import schema_id
from shared.domain.events import Outcome
from tests.contract.harness_events import EventBusHarness, sample_event


def test_publish_returns_a_message_id(event_bus_harness: EventBusHarness) -> None:
    message_id = event_bus_harness.publisher.publish(sample_event())
    assert isinstance(message_id, str) and message_id
    event_bus_harness.received(1, timeout=10)


def test_the_message_is_a_binary_mode_cloudevent(event_bus_harness: EventBusHarness) -> None:
    event = sample_event(Outcome.FAILED)
    event_bus_harness.publisher.publish(event)
    [(data, attributes)] = event_bus_harness.received(1, timeout=10)
    assert attributes["ce-id"] == event.event_id
    assert attributes["ce-type"] == EVENT_TYPE
    assert attributes["ce-source"] == EVENT_SOURCE
    assert attributes["ce-specversion"] == "1.0"
    assert attributes["ce-subject"] == event.job_id
    assert attributes["ce-time"] == "2025-03-04T05:06:12.373456Z"
    assert attributes["ce-dataschema"] == schema_id()
    assert attributes["content-type"] == "application/json"
    assert (attributes["outcome"], attributes["client_id"]) == ("failed", event.client_id)
    assert json.loads(data) == event.data()
    assert from_pubsub(data, attributes) == event


def test_publishing_again_is_a_new_message_with_the_same_event_id(
    event_bus_harness: EventBusHarness,
) -> None:
    event = sample_event()
    first = event_bus_harness.publisher.publish(event)
    second = event_bus_harness.publisher.publish(event)
    messages = event_bus_harness.received(2, timeout=10)
    assert first != second
    assert [attributes["ce-id"] for _, attributes in messages] == [event.event_id] * 2


def test_ping(event_bus_harness: EventBusHarness) -> None:
    event_bus_harness.publisher.ping()
