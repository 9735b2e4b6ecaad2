"""The embedded Pub/Sub: an outbox of messages and per-subscription deliveries in SQLite.

`SqliteEventPublisher.publish` stores the message and one delivery row per subscription
of the topic in one transaction, as Pub/Sub fans a message out to the subscriptions that
exist when it is published. The bus process (`services.bus`) leases due deliveries with
`services.bus.deliveries`, pushes them and records the outcome. A lease outlives the ack
deadline, so deliveries of a bus that died mid-push are delivered again after it.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.domain.errors import DependencyUnavailable
from shared.domain.events import GradingCompleted
from shared.events.cloudevent import to_pubsub
from shared.events.subscriptions import TopicConfig, load_subscriptions

SCHEMA = """
CREATE TABLE IF NOT EXISTS bus_messages (
    message_id TEXT PRIMARY KEY,
    topic TEXT NOT NULL,
    data BLOB NOT NULL,
    attributes TEXT NOT NULL,
    publish_time TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS bus_deliveries (
    message_id TEXT NOT NULL REFERENCES bus_messages (message_id),
    subscription TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at REAL NOT NULL,
    lease_until REAL,
    lease_token TEXT,
    last_status INTEGER,
    last_error TEXT,
    PRIMARY KEY (message_id, subscription)
);
CREATE INDEX IF NOT EXISTS bus_deliveries_due ON bus_deliveries (lease_until, next_attempt_at);
CREATE TABLE IF NOT EXISTS bus_dead_letters (
    message_id TEXT NOT NULL REFERENCES bus_messages (message_id),
    subscription TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    last_status INTEGER,
    last_error TEXT,
    dead_at TEXT NOT NULL,
    PRIMARY KEY (message_id, subscription)
)
"""


def rfc3339(moment: datetime) -> str:
    """Format a UTC instant the way Pub/Sub writes publishTime."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


@contextmanager
def unavailable_on_error(what: str) -> Iterator[None]:
    try:
        yield
    except sqlite3.Error as exc:
        raise DependencyUnavailable(f"embedded bus: {what} failed: {exc}") from exc


class SqliteEventPublisher:
    """EventPublisher on the shared SQLite file; delivered by the `services.bus` process."""

    def __init__(self, db: SqliteDatabase, topic: TopicConfig | None = None) -> None:
        self._db = db
        self._topic = topic or load_subscriptions()
        db.ensure_schema(SCHEMA)

    def publish(self, event: GradingCompleted) -> str:
        """Store the message and its fan-out durably; return a fresh message id."""
        data, attributes = to_pubsub(event)
        # Like Pub/Sub, every publish is a new message, even of an event published before:
        # subscribers dedupe on the CloudEvents id, never on the message id.
        message_id = str(uuid.uuid4().int >> 64)
        now = datetime.now(UTC)
        with unavailable_on_error("publish"), self._db.transaction() as conn:
            conn.execute(
                "INSERT INTO bus_messages (message_id, topic, data, attributes, publish_time)"
                " VALUES (?, ?, ?, ?, ?)",
                (message_id, self._topic.topic, data, json.dumps(attributes), rfc3339(now)),
            )
            conn.executemany(
                "INSERT INTO bus_deliveries (message_id, subscription, next_attempt_at)"
                " VALUES (?, ?, ?)",
                [(message_id, name, now.timestamp()) for name in self._topic.subscriptions],
            )
        return message_id

    def ping(self) -> None:
        with unavailable_on_error("ping"):
            self._db.connection().execute("SELECT 1 FROM bus_messages LIMIT 1").fetchall()
