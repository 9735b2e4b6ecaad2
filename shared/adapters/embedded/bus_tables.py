"""The embedded Pub/Sub's tables in the shared SQLite file: messages, deliveries, dead letters.

`SqliteEventPublisher` writes a message and one delivery row per subscription; the local
bus (`localcloud.pubsub`) leases, pushes, acknowledges and dead-letters the deliveries.
"""

from __future__ import annotations

from datetime import UTC, datetime

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
