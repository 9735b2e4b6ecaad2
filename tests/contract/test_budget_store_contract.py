"""The BudgetStore port on every backend: budgets are kept and replaced, a grading's cost
counts once per job against its client's and its assignment's month, and the daily spend
per client adds up to the month's."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from shared.adapters.embedded.budget_store import SqliteBudgetStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.domain.budgets import Budget, BudgetScope, Charge
from shared.ports import BudgetStore

DEC = datetime(2026, 12, 1, 9, tzinfo=UTC)
DEC_2 = datetime(2026, 12, 2, 23, 59, tzinfo=UTC)
JAN = datetime(2027, 1, 1, 0, 0, 1, tzinfo=UTC)


@pytest.fixture(params=["embedded", "google"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> BudgetStore:
    if request.param == "embedded":
        return SqliteBudgetStore(SqliteDatabase(tmp_path / "jobs.sqlite3"))
    from shared.adapters.google.budget_store import FirestoreBudgetStore

    client: Any = request.getfixturevalue("firestore_clean")
    return FirestoreBudgetStore(client, "budget")


def test_budgets_are_kept_replaced_and_removed(store: BudgetStore) -> None:
    store.set_budget(Budget(BudgetScope.CLIENT, "client-a", 5_000_000, 4_000_000))
    store.set_budget(Budget(BudgetScope.ASSIGNMENT, "bio-1", 1_000_000))
    store.set_budget(Budget(BudgetScope.CLIENT, "client-a", 9_000_000))  # raised
    assert store.budgets() == [
        Budget(BudgetScope.ASSIGNMENT, "bio-1", 1_000_000),
        Budget(BudgetScope.CLIENT, "client-a", 9_000_000),
    ]
    assert store.remove_budget(BudgetScope.ASSIGNMENT, "bio-1")
    assert not store.remove_budget(BudgetScope.ASSIGNMENT, "bio-1")
    assert [b.key for b in store.budgets()] == ["client-a"]


def test_a_cost_counts_once_per_job_against_client_and_assignment(store: BudgetStore) -> None:
    assert store.charge(Charge("job-1", "client-a", "bio-1", DEC, 700))
    assert not store.charge(Charge("job-1", "client-a", "bio-1", DEC, 700))  # redelivered
    assert store.charge(Charge("job-2", "client-a", None, DEC_2, 300))
    assert store.charge(Charge("job-3", "client-b", "bio-2", DEC, 50))
    assert store.spent(BudgetScope.CLIENT, "client-a", "2026-12") == 1000
    assert store.spent(BudgetScope.ASSIGNMENT, "bio-1", "2026-12") == 700
    assert store.spent(BudgetScope.CLIENT, "client-b", "2026-12") == 50
    assert store.spent(BudgetScope.CLIENT, "nobody", "2026-12") == 0


def test_a_new_month_starts_from_nothing(store: BudgetStore) -> None:
    assert store.charge(Charge("job-1", "client-a", "bio-1", DEC, 700))
    assert store.charge(Charge("job-2", "client-a", "bio-1", JAN, 20))
    assert store.spent(BudgetScope.CLIENT, "client-a", "2026-12") == 700
    assert store.spent(BudgetScope.CLIENT, "client-a", "2027-01") == 20
    assert store.spent(BudgetScope.ASSIGNMENT, "bio-1", "2027-01") == 20


def test_the_daily_spend_per_client_adds_up_to_the_month(store: BudgetStore) -> None:
    for n, (client, at, micros) in enumerate(
        [
            ("client-a", DEC, 100),
            ("client-a", DEC, 200),
            ("client-a", DEC_2, 50),
            ("client-b", DEC_2, 7),
            ("client-a", JAN, 1),
        ]
    ):
        assert store.charge(Charge(f"job-{n}", client, None, at, micros))
    assert store.daily_spend("2026-12") == {
        "client-a": {"2026-12-01": 300, "2026-12-02": 50},
        "client-b": {"2026-12-02": 7},
    }
    assert store.daily_spend("2026-11") == {}


def test_racing_charges_of_one_job_count_once(store: BudgetStore) -> None:
    counted: list[bool] = []
    start = threading.Barrier(6)

    def charge() -> None:
        start.wait()
        counted.append(store.charge(Charge("job-1", "client-a", "bio-1", DEC, 500)))

    threads = [threading.Thread(target=charge) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(counted) == [False] * 5 + [True]
    assert store.spent(BudgetScope.CLIENT, "client-a", "2026-12") == 500
