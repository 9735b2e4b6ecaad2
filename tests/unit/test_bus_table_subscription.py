"""The embedded bus writing a BigQuery subscription's messages into the analytics records.

Real SQLite for the bus and the records; no HTTP anywhere: a table subscription has no
endpoint, the bus itself records each event once, as Pub/Sub writes a BigQuery table.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from localcloud.pubsub.push_bus import Bus, Endpoint
from localcloud.pubsub.table_subscription import TableSubscription
from services.analytics.recorder import SUBSCRIBER
from shared.adapters.embedded.event_publisher import SqliteEventPublisher
from shared.adapters.embedded.processed_events import SqliteProcessedEvents
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.config.subscriptions import SubscriptionConfig, SubscriptionKind, TopicConfig
from shared.domain.errors import DependencyUnavailable
from shared.domain.events import AssignmentGraded
from tests.contract.harness import eventually
from tests.contract.harness_events import sample_event


def table_config(attempts: int = 3) -> SubscriptionConfig:
    return SubscriptionConfig(
        name="analytics",
        push_path="/pubsub/push",
        ack_deadline=timedelta(seconds=2),
        minimum_backoff=timedelta(seconds=0.01),
        maximum_backoff=timedelta(seconds=0.04),
        max_delivery_attempts=attempts,
        kind=SubscriptionKind.BIGQUERY,
    )


@pytest.fixture
def db(tmp_path: Path) -> SqliteDatabase:
    return SqliteDatabase(tmp_path / "gradeq.sqlite3")


@pytest.fixture
def records(db: SqliteDatabase) -> SqliteProcessedEvents:
    return SqliteProcessedEvents(db)


def publisher(db: SqliteDatabase, config: SubscriptionConfig) -> SqliteEventPublisher:
    return SqliteEventPublisher(db, TopicConfig("grading-completed", {config.name: config}))


@contextmanager
def running_bus(
    db: SqliteDatabase, table: TableSubscription, *endpoints: Endpoint
) -> Iterator[Bus]:
    bus = Bus(
        db,
        {e.config.name: e for e in endpoints},
        poll_interval_s=0.01,
        lease_grace_s=0.0,
        tables={table.config.name: table},
    )
    bus.start()
    try:
        yield bus
    finally:
        bus.stop(timeout_s=5)


def settled(bus: Bus) -> bool:
    return bus.store.pending() == 0


def test_an_event_is_recorded_once_and_acknowledged(
    db: SqliteDatabase, records: SqliteProcessedEvents
) -> None:
    config = table_config()
    event = sample_event()
    publisher(db, config).publish(event)
    with running_bus(db, TableSubscription(config, records)) as bus:
        eventually(lambda: settled(bus))
    [record] = records.records(SUBSCRIBER)
    assert record["event_id"] == event.event_id
    assert record["job_id"] == event.job_id
    assert record["outcome"] == "succeeded"
    assert record["publish_time"] is not None
    assert "callback_url" not in record  # as the analytics service records it
    assert bus.store.dead_letters() == []


def test_the_same_event_published_twice_is_recorded_once(
    db: SqliteDatabase, records: SqliteProcessedEvents
) -> None:
    config = table_config()
    event = sample_event()
    bus_publisher = publisher(db, config)
    first, second = bus_publisher.publish(event), bus_publisher.publish(event)
    assert first != second  # two messages, one event id
    with running_bus(db, TableSubscription(config, records)) as bus:
        eventually(lambda: settled(bus))
    assert [r["event_id"] for r in records.records(SUBSCRIBER)] == [event.event_id]
    assert bus.store.dead_letters() == []


def test_a_message_that_does_not_decode_is_recorded_as_malformed(
    db: SqliteDatabase, records: SqliteProcessedEvents
) -> None:
    config = table_config()
    message_id = publisher(db, config).publish(sample_event())
    with db.transaction() as conn:
        conn.execute(
            "UPDATE bus_messages SET data = ? WHERE message_id = ?", (b"{not json", message_id)
        )
    with running_bus(db, TableSubscription(config, records)) as bus:
        eventually(lambda: settled(bus))
    assert records.records(SUBSCRIBER) == []
    [malformed] = records.records(f"{SUBSCRIBER}.malformed")
    assert malformed["bytes"] == len(b"{not json")
    assert isinstance(malformed["reason"], str) and malformed["reason"]
    assert records.contains(f"{SUBSCRIBER}.malformed", f"message:{message_id}")
    assert bus.store.dead_letters() == []  # kept, as the table keeps it: nothing to retry


def test_events_of_another_type_are_acknowledged_without_a_record(
    db: SqliteDatabase, records: SqliteProcessedEvents
) -> None:
    config = table_config()
    graded = AssignmentGraded(
        event_id="assignment-1:1",
        assignment_id="assignment-1",
        client_id="client-a",
        round=1,
        submissions=1,
        succeeded=1,
        failed=0,
        cancelled=0,
        mean_score=1.0,
        occurred_at=datetime(2025, 1, 1, tzinfo=UTC),
    )
    publisher(db, config).publish(graded)
    with running_bus(db, TableSubscription(config, records)) as bus:
        eventually(lambda: settled(bus))
    assert records.records(SUBSCRIBER) == []
    assert records.records(f"{SUBSCRIBER}.malformed") == []


@dataclass
class FailingRecords:
    """The records store, failing its first `failures` writes as an unavailable store does."""

    inner: SqliteProcessedEvents
    failures: int
    calls: list[str] = field(default_factory=list)

    def add(self, subscriber: str, event_id: str, record: dict[str, object]) -> bool:
        self.calls.append(event_id)
        if len(self.calls) <= self.failures:
            raise DependencyUnavailable("record processed event: database is locked")
        return self.inner.add(subscriber, event_id, record)

    def contains(self, subscriber: str, event_id: str) -> bool:
        return self.inner.contains(subscriber, event_id)

    def records(self, subscriber: str) -> list[dict[str, Any]]:
        return self.inner.records(subscriber)


def test_a_failing_store_is_retried_with_the_retry_policy(
    db: SqliteDatabase, records: SqliteProcessedEvents, caplog: pytest.LogCaptureFixture
) -> None:
    config = table_config(attempts=5)
    event = sample_event()
    publisher(db, config).publish(event)
    failing = FailingRecords(records, failures=2)
    with (
        caplog.at_level(logging.WARNING),
        running_bus(db, TableSubscription(config, failing)) as bus,
    ):
        eventually(lambda: settled(bus))
    assert failing.calls == [event.event_id] * 3
    assert [r["event_id"] for r in records.records(SUBSCRIBER)] == [event.event_id]
    retries = [r.getMessage() for r in caplog.records if r.getMessage().startswith("delivery")]
    assert len(retries) == 2
    assert all("DependencyUnavailable" in m for m in retries)
    assert bus.store.dead_letters() == []


def test_a_store_that_keeps_failing_dead_letters_after_max_delivery_attempts(
    db: SqliteDatabase, records: SqliteProcessedEvents
) -> None:
    config = table_config(attempts=3)
    event = sample_event()
    message_id = publisher(db, config).publish(event)
    failing = FailingRecords(records, failures=1000)
    with running_bus(db, TableSubscription(config, failing)) as bus:
        eventually(lambda: bus.store.dead_letters() != [])
        eventually(lambda: settled(bus))
    [letter] = bus.store.dead_letters()
    assert (letter.message_id, letter.subscription, letter.attempts) == (
        message_id,
        "analytics",
        3,
    )
    assert letter.last_status is None
    assert letter.last_error is not None and "DependencyUnavailable" in letter.last_error
    assert len(failing.calls) == 3
    assert records.records(SUBSCRIBER) == []


def test_a_subscription_is_either_pushed_or_written(
    db: SqliteDatabase, records: SqliteProcessedEvents
) -> None:
    config = table_config()
    with pytest.raises(ValueError, match="analytics"):
        Bus(
            db,
            {"analytics": Endpoint(config, "http://127.0.0.1:9")},
            tables={"analytics": TableSubscription(config, records)},
        )
