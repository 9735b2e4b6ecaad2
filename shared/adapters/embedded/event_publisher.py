"""The embedded Pub/Sub: an outbox of messages and per-subscription deliveries in SQLite.

`SqliteEventPublisher.publish` stores the message and one delivery row per subscription
of the topic whose filter admits it, in one transaction, as Pub/Sub fans a message out to
the subscriptions that exist when it is published and acknowledges at once, for a
subscription, a message its filter does not admit. The bus process (`localcloud.pubsub`)
leases due deliveries with `localcloud.pubsub.deliveries`, pushes them and records the
outcome. A lease outlives the ack deadline, so deliveries of a bus that died mid-push are
delivered again after it.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

from shared.adapters.embedded.bus_tables import SCHEMA, rfc3339
from shared.adapters.embedded.sqlite import SqliteDatabase, unavailable_on_error
from shared.adapters.embedded.wakeup import BUS, WakeSender
from shared.codecs.cloudevent import to_pubsub
from shared.config.subscriptions import TopicConfig, load_subscriptions
from shared.domain.events import AssignmentGraded, GradePosted, GradeReviewed, GradingCompleted


class SqliteEventPublisher:
    """EventPublisher on the shared SQLite file; delivered by the `localcloud.pubsub` process."""

    def __init__(self, db: SqliteDatabase, topic: TopicConfig | None = None) -> None:
        self._db = db
        self._topic = topic or load_subscriptions()
        self._wake = WakeSender(db.path, BUS)
        db.ensure_schema(SCHEMA)

    def publish(
        self, event: GradingCompleted | AssignmentGraded | GradeReviewed | GradePosted
    ) -> str:
        """Store the message and its fan-out durably; return a fresh message id."""
        data, attributes = to_pubsub(event)
        # Like Pub/Sub, every publish is a new message, even of an event published before:
        # subscribers dedupe on the CloudEvents id, never on the message id.
        message_id = str(uuid.uuid4().int >> 64)
        now = datetime.now(UTC)
        admitted = [
            name for name, config in self._topic.subscriptions.items() if config.admits(attributes)
        ]
        if not admitted:
            return message_id  # acknowledged by every subscription: nothing to store
        with unavailable_on_error("publish"), self._db.transaction() as conn:
            conn.execute(
                "INSERT INTO bus_messages (message_id, topic, data, attributes, publish_time)"
                " VALUES (?, ?, ?, ?, ?)",
                (message_id, self._topic.topic, data, json.dumps(attributes), rfc3339(now)),
            )
            conn.executemany(
                "INSERT INTO bus_deliveries (message_id, subscription, next_attempt_at)"
                " VALUES (?, ?, ?)",
                [(message_id, name, now.timestamp()) for name in admitted],
            )
            self._db.after_commit(self._wake.notify)
        return message_id

    def ping(self) -> None:
        with unavailable_on_error("ping"):
            self._db.connection().execute("SELECT 1 FROM bus_messages LIMIT 1").fetchall()
