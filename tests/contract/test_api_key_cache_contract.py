"""A key found is remembered briefly by the process; both key stores share the memory.

Revoking a key through a store of this process forgets it at once; a revocation made
elsewhere (another instance, `gradeq keys revoke` in another process: here, a write
straight into the records) takes effect once the key's memory is over.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from shared.adapters.key_cache import KEY_CACHE_S, FoundKeys
from shared.domain.api_keys import ApiKey
from shared.ports import ApiKeyStore

NOW = datetime(2026, 1, 1, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@dataclass
class Family:
    """Key stores of one family on the same records, and a way around them."""

    store: Callable[[FoundKeys], ApiKeyStore]
    revoke_elsewhere: Callable[[str], None]
    reads: Callable[[ApiKeyStore, Callable[[], object]], int]


def _sqlite(tmp_path: Path) -> Family:
    from shared.adapters.embedded.api_key_store import SqliteApiKeyStore
    from shared.adapters.embedded.sqlite import SqliteDatabase

    path = tmp_path / "keys.db"

    def revoke_elsewhere(key_id: str) -> None:
        other = sqlite3.connect(path, isolation_level=None)
        other.execute(
            "UPDATE api_keys SET revoked_at = ? WHERE key_id = ?", (NOW.isoformat(), key_id)
        )
        other.close()

    def reads(store: ApiKeyStore, action: Callable[[], object]) -> int:
        statements: list[str] = []
        conn = store._db.connection()  # type: ignore[attr-defined]
        conn.set_trace_callback(statements.append)
        try:
            action()
        finally:
            conn.set_trace_callback(None)
        return sum("FROM api_keys" in s for s in statements)

    return Family(
        lambda found: SqliteApiKeyStore(SqliteDatabase(path), found=found), revoke_elsewhere, reads
    )


def _firestore(client: Any) -> Family:
    from shared.adapters.google import metering
    from shared.adapters.google.api_key_store import FirestoreApiKeyStore

    def revoke_elsewhere(key_id: str) -> None:
        client.collection("api_keys").document(key_id).update({"revoked_at": NOW})

    def reads(store: ApiKeyStore, action: Callable[[], object]) -> int:
        meter = store.meter  # type: ignore[attr-defined]
        before = meter.snapshot().get(metering.FIRESTORE_READS, 0)
        action()
        return int(meter.snapshot().get(metering.FIRESTORE_READS, 0) - before)

    return Family(
        lambda found: FirestoreApiKeyStore(client, "api_keys", found=found), revoke_elsewhere, reads
    )


@pytest.fixture(params=["embedded", "google"])
def family(request: pytest.FixtureRequest, tmp_path: Path) -> Family:
    if request.param == "google":
        return _firestore(request.getfixturevalue("firestore_clean"))
    return _sqlite(tmp_path)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def found(clock: Clock) -> FoundKeys:
    return FoundKeys(clock=clock.monotonic)


def _issue(store: ApiKeyStore) -> ApiKey:
    _, stored = ApiKey.issue("client-a", NOW)
    store.add(stored)
    return stored


def test_a_found_key_is_read_once_per_cache_period(
    family: Family, found: FoundKeys, clock: Clock
) -> None:
    store = family.store(found)
    stored = _issue(store)

    def fifty() -> None:
        for _ in range(50):
            assert store.get(stored.key_id) == stored

    assert family.reads(store, fifty) == 1
    clock.now += KEY_CACHE_S + 0.1
    assert family.reads(store, fifty) == 1


def test_a_key_revoked_elsewhere_stops_working_once_the_period_is_over(
    family: Family, found: FoundKeys, clock: Clock
) -> None:
    store = family.store(found)
    stored = _issue(store)
    assert store.get(stored.key_id) == stored
    family.revoke_elsewhere(stored.key_id)
    clock.now += KEY_CACHE_S - 0.1
    remembered = store.get(stored.key_id)
    assert remembered is not None and remembered.revoked_at is None  # still in the window
    clock.now += 0.1
    seen = store.get(stored.key_id)
    assert seen is not None and seen.revoked_at == NOW
    assert not seen.usable(NOW + timedelta(seconds=1))


def test_a_revocation_in_this_process_is_seen_at_once_by_every_store_on_the_records(
    family: Family, found: FoundKeys
) -> None:
    reader, admin = family.store(found), family.store(found)
    stored = _issue(admin)
    assert reader.get(stored.key_id) == stored
    admin.revoke(stored.key_id, NOW + timedelta(minutes=1))
    seen = reader.get(stored.key_id)
    assert seen is not None and seen.revoked_at == NOW + timedelta(minutes=1)


def test_an_unknown_key_is_not_remembered(family: Family, found: FoundKeys) -> None:
    store = family.store(found)
    _, stored = ApiKey.issue("client-a", NOW)
    assert store.get(stored.key_id) is None
    # Added by another process: found at the next look-up, not hidden by a memory of absence.
    family.store(FoundKeys()).add(stored)
    assert store.get(stored.key_id) == stored
