"""AssignmentGraded as a CloudEvent on the jobs' topic, and the job subscribers ignoring it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from cloudevents.core.base import BaseCloudEvent
from cloudevents.core.bindings.http import HTTPMessage, from_binary
from cloudevents.core.formats.json import JSONFormat
from cloudevents.core.v1.event import CloudEvent
from flask.testing import FlaskClient

from shared.adapters.embedded.processed_events import SqliteProcessedEvents
from shared.codecs.cloudevent import (
    ASSIGNMENT_GRADED_TYPE,
    InvalidEvent,
    assignment_graded_from_cloudevent,
    from_pubsub,
    to_pubsub,
)
from shared.domain.events import AssignmentGraded
from tests.support.push import AUTH, pubsub_push_body
from tests.unit.test_notification_app import client, guard, settings  # noqa: F401

EVENT = AssignmentGraded(
    "e-abc", "a-1", "client-a", 1, 30, 28, 2, 0, 7.25, datetime(2026, 3, 1, tzinfo=UTC)
)


def decode(data: bytes, attributes: dict[str, str]) -> BaseCloudEvent:
    headers = {k.lower(): v for k, v in attributes.items() if k != "client_id"}
    return from_binary(HTTPMessage(headers=headers, body=data), JSONFormat(), CloudEvent)


def test_the_event_round_trips_with_its_own_type_and_schema() -> None:
    data, attributes = to_pubsub(EVENT)
    assert attributes["ce-type"] == ASSIGNMENT_GRADED_TYPE
    assert attributes["ce-id"] == "e-abc" and attributes["ce-subject"] == "a-1"
    assert attributes["client_id"] == "client-a"
    assert assignment_graded_from_cloudevent(decode(data, attributes)) == EVENT


def test_data_breaking_the_schema_is_refused() -> None:
    bad = AssignmentGraded("e-x", "a-1", "c", 0, 0, 0, 0, 0, None, EVENT.occurred_at)
    data, attributes = to_pubsub(bad)  # no submissions: the schema wants at least one
    with pytest.raises(InvalidEvent):
        assignment_graded_from_cloudevent(decode(data, attributes))


def test_the_job_event_decoder_does_not_take_it_for_a_grading_completed() -> None:
    with pytest.raises(InvalidEvent):
        from_pubsub(*to_pubsub(EVENT))


def test_a_job_subscriber_acknowledges_it_without_handling_or_recording_it(
    client: FlaskClient,  # noqa: F811
    processed: SqliteProcessedEvents,
) -> None:
    response = client.post(
        "/pubsub/push", json=pubsub_push_body(EVENT, "notification", "7"), headers=AUTH
    )
    assert response.status_code == 204
    # Not taken for a malformed delivery (which is recorded and logged as an error).
    assert processed.records("notification.malformed") == []
    assert processed.records("notification") == []
