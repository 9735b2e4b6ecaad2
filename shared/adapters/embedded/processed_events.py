"""ProcessedEvents on SQLite: one row per (subscriber, event id), inserted if absent."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from shared.adapters.embedded.sqlite import SqliteDatabase, unavailable_on_error
from shared.domain.erasure import is_tombstone

SCHEMA = """
CREATE TABLE IF NOT EXISTS processed_events (
    subscriber TEXT NOT NULL,
    event_id TEXT NOT NULL,
    record TEXT NOT NULL,
    processed_at TEXT NOT NULL,
    PRIMARY KEY (subscriber, event_id)
)
"""


class SqliteProcessedEvents:
    """What each subscriber has handled, in the shared SQLite file."""

    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db
        db.ensure_schema(SCHEMA)

    def add(self, subscriber: str, event_id: str, record: dict[str, object]) -> bool:
        text = json.dumps(record, separators=(",", ":"), default=str)
        now = datetime.now(UTC).isoformat()
        with unavailable_on_error("record processed event"), self._db.transaction() as conn:
            inserted = conn.execute(
                "INSERT OR IGNORE INTO processed_events"
                " (subscriber, event_id, record, processed_at) VALUES (?, ?, ?, ?)",
                (subscriber, event_id, text, now),
            ).rowcount
        return inserted == 1

    def contains(self, subscriber: str, event_id: str) -> bool:
        with unavailable_on_error("look up processed event"):
            row = (
                self._db.connection()
                .execute(
                    "SELECT 1 FROM processed_events WHERE subscriber = ? AND event_id = ?",
                    (subscriber, event_id),
                )
                .fetchone()
            )
        return row is not None

    def records(self, subscriber: str) -> list[dict[str, Any]]:
        """Return every record the subscriber stored, oldest first (local reporting); an
        erased event's tombstone is no record."""
        with unavailable_on_error("read processed events"):
            rows = (
                self._db.connection()
                .execute(
                    "SELECT record FROM processed_events WHERE subscriber = ?"
                    " ORDER BY processed_at, event_id",
                    (subscriber,),
                )
                .fetchall()
            )
        return [r for r in (json.loads(row["record"]) for row in rows) if not is_tombstone(r)]
