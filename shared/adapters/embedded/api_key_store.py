"""ApiKeyStore on SQLite: one row per key id, holding the digest, never the key.

A key found is remembered briefly by the process, for every store on the same file
(`shared.adapters.key_cache`): a revocation by another process takes effect within
KEY_CACHE_S.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime

from shared.adapters.embedded.sqlite import SqliteDatabase, unavailable_on_error
from shared.adapters.key_cache import FOUND_KEYS, KEY_CACHE_S, FoundKeys
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

    def __init__(
        self, db: SqliteDatabase, cache_s: float = KEY_CACHE_S, found: FoundKeys = FOUND_KEYS
    ) -> None:
        self._found = found
        self._db = db
        self._cache_s = cache_s
        self._path = db.path.resolve()
        db.ensure_schema(SCHEMA)

    def _forget(self, key_id: str) -> None:
        self._found.forget(self._path, key_id)

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
        remembered = self._found.get(self._path, key_id)
        if remembered is not None:
            return remembered
        now = self._found.now()
        with unavailable_on_error("read API key"):
            row = (
                self._db.connection()
                .execute("SELECT * FROM api_keys WHERE key_id = ?", (key_id,))
                .fetchone()
            )
        if row is None:
            return None
        key = _decode(row)
        self._found.remember(self._path, key, self._cache_s, since=now)
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
