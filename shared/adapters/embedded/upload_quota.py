"""UploadQuota on SQLite: one row per client, holding the current UTC day's bytes."""

from __future__ import annotations

from datetime import date

from shared.adapters.embedded.sqlite import SqliteDatabase, unavailable_on_error

SCHEMA = """
CREATE TABLE IF NOT EXISTS upload_bytes (
    client_id TEXT PRIMARY KEY,
    day TEXT NOT NULL,
    bytes INTEGER NOT NULL
)
"""

#: A new day starts the count again; within the day, the update is conditional on the limit.
_RESERVE = """
INSERT INTO upload_bytes (client_id, day, bytes) VALUES (:client, :day, :size)
ON CONFLICT (client_id) DO UPDATE SET
    day = :day,
    bytes = CASE WHEN upload_bytes.day = :day THEN upload_bytes.bytes + :size ELSE :size END
WHERE (CASE WHEN upload_bytes.day = :day THEN upload_bytes.bytes + :size ELSE :size END)
    <= :limit
"""


class SqliteUploadQuota:
    """UploadQuota in the shared SQLite file: one conditional upsert per reservation."""

    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db
        db.ensure_schema(SCHEMA)

    def reserve(self, client_id: str, day: date, size: int, limit: int) -> bool:
        if size > limit:
            return False
        values = {"client": client_id, "day": day.isoformat(), "size": size, "limit": limit}
        with unavailable_on_error("count upload bytes"), self._db.transaction() as conn:
            return conn.execute(_RESERVE, values).rowcount == 1
