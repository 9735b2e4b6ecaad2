"""ApiKeyStore on SQLite: one row per key id, holding the digest, never the key.

Every request to the intake looks its key up, so a key found is remembered for
`KEY_CACHE_S` by the process. Revoking a key, or adding one, forgets it at once in the
process that does it (the entries are shared by every store on the same file); another
process (say, `gradeq keys revoke` run beside a live intake) sees the revocation within
KEY_CACHE_S. Expiry is judged at each use, from the remembered record. Unknown keys are
not remembered here.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from datetime import datetime
from pathlib import Path

from shared.adapters.embedded.sqlite import SqliteDatabase, unavailable_on_error
from shared.domain.api_keys import ApiKey, ApiKeyNotFound

SCHEMA = """
CREATE TABLE IF NOT EXISTS api_keys (
    key_id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    digest TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at TEXT,
    revoked_at TEXT
)
"""


#: How long a process trusts a key it read: the longest a revocation elsewhere takes to
#: reach it.
KEY_CACHE_S = 5.0
#: Remembered keys per process; past this the memory is cleared, not grown.
KEY_CACHE_SIZE = 10_000
_found: dict[tuple[Path, str], tuple[float, ApiKey]] = {}
_found_guard = threading.Lock()


def _text(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def _moment(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def _decode(row: sqlite3.Row) -> ApiKey:
    created = _moment(row["created_at"])
    assert created is not None
    return ApiKey(
        key_id=row["key_id"],
        client_id=row["client_id"],
        digest=row["digest"],
        created_at=created,
        expires_at=_moment(row["expires_at"]),
        revoked_at=_moment(row["revoked_at"]),
    )


class SqliteApiKeyStore:
    """API keys in the shared SQLite file."""

    def __init__(self, db: SqliteDatabase, cache_s: float = KEY_CACHE_S) -> None:
        self._db = db
        self._cache_s = cache_s
        self._path = db.path.resolve()
        db.ensure_schema(SCHEMA)

    def _forget(self, key_id: str) -> None:
        with _found_guard:
            _found.pop((self._path, key_id), None)

    def add(self, key: ApiKey) -> None:
        self._forget(key.key_id)
        with unavailable_on_error("store API key"), self._db.transaction() as conn:
            conn.execute(
                "INSERT INTO api_keys (key_id, client_id, digest, created_at, expires_at,"
                " revoked_at) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    key.key_id,
                    key.client_id,
                    key.digest,
                    _text(key.created_at),
                    _text(key.expires_at),
                    _text(key.revoked_at),
                ),
            )

    def get(self, key_id: str) -> ApiKey | None:
        now = time.monotonic()
        entry = _found.get((self._path, key_id))
        if entry is not None and entry[0] > now:
            return entry[1]
        with unavailable_on_error("read API key"):
            row = (
                self._db.connection()
                .execute("SELECT * FROM api_keys WHERE key_id = ?", (key_id,))
                .fetchone()
            )
        if row is None:
            return None
        key = _decode(row)
        if self._cache_s > 0:
            with _found_guard:
                if len(_found) >= KEY_CACHE_SIZE:
                    _found.clear()
                _found[(self._path, key_id)] = (now + self._cache_s, key)
        return key

    def list(self, client_id: str | None = None) -> list[ApiKey]:
        query = "SELECT * FROM api_keys"
        params: tuple[str, ...] = ()
        if client_id is not None:
            query, params = query + " WHERE client_id = ?", (client_id,)
        with unavailable_on_error("list API keys"):
            rows = self._db.connection().execute(query + " ORDER BY created_at, key_id", params)
            return [_decode(r) for r in rows.fetchall()]

    def revoke(self, key_id: str, now: datetime) -> ApiKey:
        self._forget(key_id)
        with unavailable_on_error("revoke API key"), self._db.transaction() as conn:
            row = conn.execute("SELECT * FROM api_keys WHERE key_id = ?", (key_id,)).fetchone()
            if row is None:
                raise ApiKeyNotFound(f"no API key {key_id}")
            revoked = _decode(row).revoke(now)
            conn.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE key_id = ?",
                (_text(revoked.revoked_at), key_id),
            )
            # Also after the commit: a reader in between may have remembered the old row.
            self._db.after_commit(lambda: self._forget(key_id))
        return revoked
