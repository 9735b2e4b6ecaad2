"""ContextCacheRecords on SQLite: one row per prompt prefix and model."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from shared.adapters.embedded.sqlite import SqliteDatabase, unavailable_on_error
from shared.domain.context_cache import ContextCacheRecord

SCHEMA = """
CREATE TABLE IF NOT EXISTS context_caches (
    key TEXT PRIMARY KEY,
    assignment_id TEXT NOT NULL,
    model TEXT NOT NULL,
    name TEXT NOT NULL,
    expire_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS context_caches_assignment ON context_caches (assignment_id)
"""


def _row(record: ContextCacheRecord) -> tuple[str, str, str, str, str]:
    return (
        record.key,
        record.assignment_id,
        record.model,
        record.name,
        record.expire_at.isoformat(),
    )


def _record(row: Any) -> ContextCacheRecord:
    return ContextCacheRecord(
        row["key"],
        row["assignment_id"],
        row["model"],
        row["name"],
        datetime.fromisoformat(row["expire_at"]),
    )


class SqliteContextCacheRecords:
    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db
        db.ensure_schema(SCHEMA)

    def get(self, key: str) -> ContextCacheRecord | None:
        with unavailable_on_error("read a context cache record"):
            row = (
                self._db.connection()
                .execute("SELECT * FROM context_caches WHERE key = ?", (key,))
                .fetchone()
            )
        return _record(row) if row is not None else None

    def claim(self, record: ContextCacheRecord) -> bool:
        with unavailable_on_error("claim a context cache"), self._db.transaction() as conn:
            stored = conn.execute(
                "INSERT INTO context_caches (key, assignment_id, model, name, expire_at)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING",
                _row(record),
            )
            return stored.rowcount == 1

    def replace(self, old: ContextCacheRecord, new: ContextCacheRecord) -> bool:
        with unavailable_on_error("replace a context cache record"), self._db.transaction() as conn:
            replaced = conn.execute(
                "UPDATE context_caches SET assignment_id = ?, model = ?, name = ?, expire_at = ?"
                " WHERE key = ? AND name = ? AND expire_at = ?",
                (*_row(new)[1:], old.key, old.name, old.expire_at.isoformat()),
            )
            return replaced.rowcount == 1

    def of_assignment(self, assignment_id: str) -> list[ContextCacheRecord]:
        with unavailable_on_error("list context cache records"):
            rows = (
                self._db.connection()
                .execute(
                    "SELECT * FROM context_caches WHERE assignment_id = ? ORDER BY key",
                    (assignment_id,),
                )
                .fetchall()
            )
        return [_record(r) for r in rows]

    def remove(self, key: str) -> None:
        with unavailable_on_error("remove a context cache record"), self._db.transaction() as conn:
            conn.execute("DELETE FROM context_caches WHERE key = ?", (key,))
