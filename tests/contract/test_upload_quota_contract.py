"""The UploadQuota port on every backend: a client's upload bytes per UTC day never pass
their limit, also under racing reservations, and a new day starts from nothing."""

from __future__ import annotations

import threading
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.adapters.embedded.upload_quota import SqliteUploadQuota
from shared.ports import UploadQuota

DAY = date(2026, 12, 1)


@pytest.fixture(params=["embedded", "google"])
def quota(request: pytest.FixtureRequest, tmp_path: Path) -> UploadQuota:
    if request.param == "embedded":
        return SqliteUploadQuota(SqliteDatabase(tmp_path / "jobs.sqlite3"))
    from shared.adapters.google.upload_quota import FirestoreUploadQuota

    client: Any = request.getfixturevalue("firestore_clean")
    return FirestoreUploadQuota(client, "upload_quota")


def test_bytes_are_counted_up_to_the_limit_and_no_further(quota: UploadQuota) -> None:
    assert quota.reserve("client-a", DAY, 600, limit=1000)
    assert quota.reserve("client-a", DAY, 400, limit=1000)  # exactly the limit
    assert not quota.reserve("client-a", DAY, 1, limit=1000)
    assert quota.reserve("client-b", DAY, 1000, limit=1000)  # each client its own


def test_a_refused_reservation_is_not_counted(quota: UploadQuota) -> None:
    assert quota.reserve("client-a", DAY, 600, limit=1000)
    assert not quota.reserve("client-a", DAY, 500, limit=1000)
    assert quota.reserve("client-a", DAY, 400, limit=1000)


def test_a_new_day_starts_from_nothing(quota: UploadQuota) -> None:
    assert quota.reserve("client-a", DAY, 1000, limit=1000)
    assert not quota.reserve("client-a", DAY, 1, limit=1000)
    assert quota.reserve("client-a", date(2026, 12, 2), 1000, limit=1000)


def test_racing_reservations_never_pass_the_limit(quota: UploadQuota) -> None:
    granted: list[bool] = []
    start = threading.Barrier(8)

    def reserve() -> None:
        start.wait()
        granted.append(quota.reserve("client-a", DAY, 100, limit=500))

    threads = [threading.Thread(target=reserve) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(granted) == [False, False, False, True, True, True, True, True]
