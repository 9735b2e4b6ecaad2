"""The ContextCacheRecords port on every backend: a cache is claimed once, a record is
replaced only from what was read, and an assignment's records are found and removed."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from shared.adapters.embedded.context_cache_records import SqliteContextCacheRecords
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.domain.context_cache import ContextCacheRecord
from shared.ports import ContextCacheRecords

NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)
CLAIM = ContextCacheRecord("prefix-1", "bio-1", "gemini-2.5-flash", "", NOW + timedelta(minutes=1))


@pytest.fixture(params=["embedded", "google"])
def records(request: pytest.FixtureRequest, tmp_path: Path) -> ContextCacheRecords:
    if request.param == "embedded":
        return SqliteContextCacheRecords(SqliteDatabase(tmp_path / "jobs.sqlite3"))
    from shared.adapters.google.context_cache_records import FirestoreContextCacheRecords

    client: Any = request.getfixturevalue("firestore_clean")
    return FirestoreContextCacheRecords(client, "context_caches")


def test_a_cache_is_claimed_once_then_published(records: ContextCacheRecords) -> None:
    assert records.get("prefix-1") is None
    assert records.claim(CLAIM)
    assert not records.claim(CLAIM)
    made = ContextCacheRecord(
        "prefix-1", "bio-1", "gemini-2.5-flash", "cachedContents/a", NOW + timedelta(hours=1)
    )
    assert records.replace(CLAIM, made)
    assert records.get("prefix-1") == made
    assert not records.replace(CLAIM, made)  # no longer what was read


def test_racing_claims_and_takeovers_have_one_winner(records: ContextCacheRecords) -> None:
    assert records.claim(CLAIM)
    won: list[bool] = []
    start = threading.Barrier(6)

    def take_over(n: int) -> None:
        new = ContextCacheRecord("prefix-1", "bio-1", "m", "", NOW + timedelta(minutes=n + 2))
        start.wait()
        won.append(records.replace(CLAIM, new))

    threads = [threading.Thread(target=take_over, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(won) == [False] * 5 + [True]


def test_an_assignments_records_are_found_and_removed(records: ContextCacheRecords) -> None:
    other = ContextCacheRecord("prefix-2", "bio-2", "m", "cachedContents/b", NOW)
    assert records.claim(CLAIM) and records.claim(other)
    assert records.of_assignment("bio-1") == [CLAIM]
    records.remove("prefix-1")
    assert records.of_assignment("bio-1") == [] and records.get("prefix-2") == other
