"""The QuotaLedger port on every backend: a change is atomic (racing changes from many
threads never lose one), a missing state starts from None, and the pool's rules run on it
as they do in memory."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from shared.adapters.embedded.quota_ledger import SqliteQuotaLedger
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.adapters.graders.quota_pool import LaneRank, PoolLimits, Take, status, take
from shared.ports import QuotaLedger


@pytest.fixture(params=["embedded", "google"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> QuotaLedger:
    if request.param == "embedded":
        return SqliteQuotaLedger(SqliteDatabase(tmp_path / "jobs.sqlite3"))
    from shared.adapters.google.quota_ledger import FirestoreQuotaLedger

    client: Any = request.getfixturevalue("firestore_clean")
    return FirestoreQuotaLedger(client, "quota_ledger")


def count(state: dict[str, Any] | None) -> tuple[dict[str, Any], int]:
    n = (state or {}).get("n", 0) + 1
    return {"n": n}, n


def test_a_missing_state_starts_from_none_and_each_key_is_its_own(ledger: QuotaLedger) -> None:
    assert ledger.read("openai/m") is None
    assert ledger.change("openai/m", count) == 1
    assert ledger.change("openai/m", count) == 2
    assert ledger.change("gemini/g", count) == 1
    assert ledger.read("openai/m") == {"n": 2}


def test_racing_changes_are_each_applied_once(ledger: QuotaLedger) -> None:
    start = threading.Barrier(8)
    answers: list[int] = []

    def change() -> None:
        start.wait()
        answers.append(ledger.change("openai/m", count))

    threads = [threading.Thread(target=change) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(answers) == list(range(1, 9))
    assert ledger.read("openai/m") == {"n": 8}


def test_racing_takes_never_grant_more_than_the_pacing_part(ledger: QuotaLedger) -> None:
    limits = PoolLimits(rpm=100)  # 10 requests per pacing part
    lanes = {"standard": LaneRank(1)}
    start = threading.Barrier(6)
    granted: list[int] = []

    def take_slice(holder: str) -> None:
        ask = Take(holder=holder, lane="standard", requests=4, tokens_each=10)
        start.wait()
        grant = ledger.change("openai/m", lambda s: take(s, ask, limits, lanes, 1000.0))
        granted.append(grant.requests)

    threads = [threading.Thread(target=take_slice, args=(f"h{i}",)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(granted) == 10
    assert status(ledger.read("openai/m"), limits, 1000.0)["requests_in_window"] == 10
