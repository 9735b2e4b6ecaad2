"""QuotaLedger on SQLite: one row per provider model, its state as JSON.

The change runs inside one write transaction (the writers' queue serializes them), so a
read and the write that follows it are atomic for every process sharing the file.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from shared.adapters.embedded.sqlite import SqliteDatabase, unavailable_on_error

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS quota_ledger (
    key TEXT PRIMARY KEY,
    state TEXT NOT NULL
)
"""


class SqliteQuotaLedger:
    """QuotaLedger in the shared SQLite file: a read and an upsert in one transaction."""

    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db
        db.ensure_schema(SCHEMA)

    def change(
        self, key: str, change: Callable[[dict[str, Any] | None], tuple[dict[str, Any], T]]
    ) -> T:
        with unavailable_on_error("change the quota ledger"), self._db.transaction() as conn:
            row = conn.execute("SELECT state FROM quota_ledger WHERE key = ?", (key,)).fetchone()
            state, answer = change(json.loads(row[0]) if row else None)
            conn.execute(
                "INSERT INTO quota_ledger (key, state) VALUES (?, ?)"
                " ON CONFLICT (key) DO UPDATE SET state = excluded.state",
                (key, json.dumps(state, separators=(",", ":"))),
            )
            return answer

    def read(self, key: str) -> dict[str, Any] | None:
        with unavailable_on_error("read the quota ledger"):
            row = (
                self._db.connection()
                .execute("SELECT state FROM quota_ledger WHERE key = ?", (key,))
                .fetchone()
            )
        if row is None:
            return None
        loaded: dict[str, Any] = json.loads(row[0])
        return loaded
