"""A key found is remembered briefly; revoking it in the same process forgets it at once."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from shared.adapters.embedded import api_key_store
from shared.adapters.embedded.api_key_store import SqliteApiKeyStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.domain.api_keys import ApiKey

NOW = datetime(2026, 1, 1, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(api_key_store.time, "monotonic", fake.monotonic)
    monkeypatch.setattr(api_key_store, "_found", {})
    return fake


def _revoke_elsewhere(path: Path, key_id: str) -> None:
    """As another process (`gradeq keys revoke`) would: straight in the file."""
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("UPDATE api_keys SET revoked_at = ? WHERE key_id = ?", (NOW.isoformat(), key_id))
    other.close()


def _reads(store: SqliteApiKeyStore, key_id: str, times: int) -> int:
    statements: list[str] = []
    conn = store._db.connection()
    conn.set_trace_callback(statements.append)
    try:
        for _ in range(times):
            assert store.get(key_id) is not None
    finally:
        conn.set_trace_callback(None)
    return sum("FROM api_keys" in s for s in statements)


def test_a_found_key_is_read_from_the_file_once_per_cache_period(
    tmp_path: Path, clock: Clock
) -> None:
    store = SqliteApiKeyStore(SqliteDatabase(tmp_path / "k.db"))
    _, stored = ApiKey.issue("client-a", NOW)
    store.add(stored)
    assert _reads(store, stored.key_id, 50) == 1
    clock.now += api_key_store.KEY_CACHE_S + 0.1
    assert _reads(store, stored.key_id, 5) == 1


def test_a_revocation_elsewhere_is_seen_within_the_cache_period(
    tmp_path: Path, clock: Clock
) -> None:
    store = SqliteApiKeyStore(SqliteDatabase(tmp_path / "k.db"))
    _, stored = ApiKey.issue("client-a", NOW)
    store.add(stored)
    assert store.get(stored.key_id) == stored
    _revoke_elsewhere(store._db.path, stored.key_id)
    remembered = store.get(stored.key_id)
    assert remembered is not None and remembered.revoked_at is None
    clock.now += api_key_store.KEY_CACHE_S
    seen = store.get(stored.key_id)
    assert seen is not None and seen.revoked_at == NOW


def test_a_revocation_in_this_process_is_seen_at_once_by_every_store_of_the_file(
    tmp_path: Path, clock: Clock
) -> None:
    path = tmp_path / "k.db"
    reader, admin = SqliteApiKeyStore(SqliteDatabase(path)), SqliteApiKeyStore(SqliteDatabase(path))
    _, stored = ApiKey.issue("client-a", NOW)
    admin.add(stored)
    assert reader.get(stored.key_id) == stored
    admin.revoke(stored.key_id, NOW + timedelta(minutes=1))
    seen = reader.get(stored.key_id)
    assert seen is not None and seen.revoked_at == NOW + timedelta(minutes=1)


def test_an_unknown_key_is_not_remembered(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SqliteApiKeyStore(SqliteDatabase(tmp_path / "k.db"))
    _, stored = ApiKey.issue("client-a", NOW)
    assert store.get(stored.key_id) is None
    monkeypatch.setattr(store, "_forget", lambda key_id: None)  # added as elsewhere
    store.add(stored)
    assert store.get(stored.key_id) == stored
