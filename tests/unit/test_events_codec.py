"""GradingCompleted <-> CloudEvent on Pub/Sub, the JSON Schema, and push envelopes."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from shared.codecs.cloudevent import (
    EVENT_SOURCE,
    EVENT_TYPE,
    InvalidEvent,
    from_pubsub,
    to_pubsub,
    to_structured_json,
)
from shared.codecs.event_schema import schema, schema_errors, schema_id
from shared.codecs.push_envelope import InvalidPushEnvelope, from_push_envelope
from shared.domain.events import GradingCompleted, Outcome
from tests.contract.harness_events import sample_event


def envelope(event: GradingCompleted, **message_changes: Any) -> dict[str, Any]:
    data, attributes = to_pubsub(event)
    message: dict[str, Any] = {
        "data": base64.b64encode(data).decode(),
        "attributes": attributes,
        "messageId": "1234567890",
        "publishTime": "2025-03-04T05:06:13.000123456Z",
    }
    message.update(message_changes)
    return {
        "message": message,
        "subscription": "projects/p/subscriptions/notification",
        "deliveryAttempt": 2,
    }


@pytest.mark.parametrize("outcome", list(Outcome))
def test_real_events_match_the_schema(outcome: Outcome) -> None:
    assert schema_errors(sample_event(outcome).data()) == []


def test_event_without_callback_or_assignment_matches_the_schema() -> None:
    data = sample_event(callback_url=None).data()
    data["assignment_id"] = None
    assert schema_errors(data) == []


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"outcome": "exploded"}, "$.outcome"),
        ({"max_score": 0}, "$.max_score"),
        ({"attempts": -1}, "$.attempts"),
        ({"attempts": 1.5}, "$.attempts"),
        ({"score": "7"}, "$.score"),
        ({"surprise": True}, "$"),
        ({"timings": {"queue_wait_ms": 1, "processing_ms": 2}}, "$.timings"),
        ({"timings": {"queue_wait_ms": 1, "processing_ms": 2, "total_ms": 3, "x": 4}}, "$.timings"),
        ({"error": {"type": "boom"}}, "$.error"),
    ],
)
def test_schema_rejects_bad_data(change: dict[str, Any], where: str) -> None:
    data = sample_event().data() | change
    errors = schema_errors(data)
    assert errors and errors[0].startswith(where)


def test_schema_requires_every_field() -> None:
    data = sample_event().data()
    del data["assignment_id"]
    assert schema_errors(data) == ["$: 'assignment_id' is a required property"]


def test_pubsub_attributes_follow_the_binary_binding() -> None:
    event = sample_event(Outcome.FAILED)
    _, attributes = to_pubsub(event)
    assert attributes == {
        "ce-id": event.event_id,
        "ce-type": EVENT_TYPE,
        "ce-source": EVENT_SOURCE,
        "ce-specversion": "1.0",
        "ce-time": "2025-03-04T05:06:12.373456Z",
        "ce-subject": event.job_id,
        "ce-dataschema": schema()["$id"],
        "content-type": "application/json",
        "outcome": "failed",
        "has_callback": "true",
        "client_id": "client-a",
    }
    assert schema_id() == "https://gradeq.dev/schemas/grading_completed.v1.json"


def test_pubsub_data_is_the_event_data_as_json() -> None:
    event = sample_event()
    data, _ = to_pubsub(event)
    assert json.loads(data) == event.data()


@pytest.mark.parametrize("outcome", list(Outcome))
def test_round_trip_through_pubsub(outcome: Outcome) -> None:
    event = sample_event(outcome)
    assert from_pubsub(*to_pubsub(event)) == event


def test_decoding_tolerates_attribute_spelling() -> None:
    event = sample_event()
    data, attributes = to_pubsub(event)
    shouted = {(n.upper() if n.startswith("ce-") else n): v for n, v in attributes.items()}
    shouted["ce-datacontenttype"] = shouted.pop("content-type")
    assert from_pubsub(data, shouted) == event


@pytest.mark.parametrize("missing", ["ce-id", "ce-time", "ce-type", "ce-specversion"])
def test_decoding_refuses_missing_context_attributes(missing: str) -> None:
    data, attributes = to_pubsub(sample_event())
    del attributes[missing]
    with pytest.raises(InvalidEvent, match=missing):
        from_pubsub(data, attributes)


def test_structured_json_carries_context_and_data() -> None:
    event = sample_event()
    document = json.loads(to_structured_json(event))
    assert document["specversion"] == "1.0"
    assert document["id"] == event.event_id
    assert document["type"] == EVENT_TYPE
    assert document["source"] == EVENT_SOURCE
    assert document["time"] == "2025-03-04T05:06:12.373456Z"
    assert document["subject"] == event.job_id
    assert document["data"] == event.data()


def test_push_envelope_is_decoded_with_its_delivery_facts() -> None:
    event = sample_event()
    received = from_push_envelope(envelope(event))
    assert received.event == event
    assert received.message_id == "1234567890"
    assert received.publish_time is not None
    assert received.publish_time.isoformat() == "2025-03-04T05:06:13.000123+00:00"
    assert received.subscription == "projects/p/subscriptions/notification"
    assert received.delivery_attempt == 2
    assert received.attributes["ce-id"] == event.event_id


def test_push_envelope_accepts_snake_case_twins() -> None:
    body = envelope(sample_event())
    message = body["message"]
    message["message_id"] = message.pop("messageId")
    message["publish_time"] = message.pop("publishTime")
    received = from_push_envelope(body)
    assert received.message_id == "1234567890"
    assert received.publish_time is not None


def _mangled(path: str, value: Any) -> dict[str, Any]:
    body = envelope(sample_event())
    target = body
    keys = path.split(".")
    for key in keys[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[keys[-1]]
    else:
        target[keys[-1]] = value
    return body


_DELETE = object()
_NOT_SCHEMA = base64.b64encode(json.dumps({"job_id": "j"}).encode()).decode()


@pytest.mark.parametrize(
    ("path", "value", "detail"),
    [
        ("message", _DELETE, "no 'message'"),
        ("message", "text", "no 'message'"),
        ("message.data", _DELETE, "base64"),
        ("message.data", "***", "not valid base64"),
        ("message.data", base64.b64encode(b"not json").decode(), "not a JSON object"),
        ("message.data", _NOT_SCHEMA, "does not match its schema"),
        ("message.attributes", _DELETE, "attributes"),
        ("message.attributes", {"ce-id": 3}, "attributes"),
        ("message.attributes.ce-type", "dev.other.v1", "unexpected event type"),
        ("message.attributes.ce-time", "yesterday", "invalid CloudEvents attributes"),
        ("message.messageId", _DELETE, "messageId"),
        ("message.publishTime", "soon", "RFC 3339"),
    ],
)
def test_malformed_envelopes_are_refused(path: str, value: Any, detail: str) -> None:
    with pytest.raises(InvalidPushEnvelope, match=detail) as caught:
        from_push_envelope(_mangled(path, value))
    assert caught.value.status == 400
    assert caught.value.slug == "invalid-push-envelope"


@pytest.mark.parametrize("body", [None, [], "message", 3])
def test_non_object_bodies_are_refused(body: Any) -> None:
    with pytest.raises(InvalidPushEnvelope, match="JSON object"):
        from_push_envelope(body)


def test_schema_violations_are_listed_in_the_problem() -> None:
    with pytest.raises(InvalidPushEnvelope) as caught:
        from_push_envelope(_mangled("message.data", _NOT_SCHEMA))
    assert "$: 'client_id' is a required property" in caught.value.extensions["errors"]
