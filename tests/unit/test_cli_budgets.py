"""`gradeq budgets` against a real intake: set, list, spend, remove; a refused submission
names the budget."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from shared.adapters.embedded.assignment_store import (
    SqliteAssignmentStore,
    SqliteJobBatch,
    SqliteTally,
)
from shared.adapters.embedded.budget_store import SqliteBudgetStore
from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.budgets import Charge
from tests.fakes import FakePublisher, FakeTaskQueue
from tests.unit.test_cli import as_json, gradeq, request_file, url  # noqa: F401

NOW = datetime(2026, 12, 5, 12, tzinfo=UTC)


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(NOW)


@pytest.fixture
def adapters(settings: Settings) -> Adapters:
    db = SqliteDatabase(settings.database_path)
    jobs = SqliteJobStore(db, on_write=SqliteTally(db).record)
    return Adapters(
        store=jobs,
        queue=FakeTaskQueue(),
        publisher=FakePublisher(),
        assignments=SqliteAssignmentStore(db),
        batch=SqliteJobBatch(db, jobs),
        budgets=SqliteBudgetStore(db),
    )


def test_set_list_spend_and_remove(url: str, adapters: Adapters) -> None:  # noqa: F811
    assert adapters.budgets is not None
    adapters.budgets.charge(Charge("j1", "client-a", None, NOW, 1_250_000))
    adapters.budgets.charge(Charge("j2", "client-a", None, datetime(2026, 12, 1, tzinfo=UTC), 50))
    result = gradeq(url, "budgets", "set", "client", "client-a", "--hard", "2", "--soft", "$1")
    assert result.exit_code == 0, result.output
    assert "client client-a: $1.25 spent of $2.00 in 2026-12 (past soft limit)" in result.stdout
    listed = as_json(gradeq(url, "budgets", "list", "--json"))
    assert [(b["key"], b["hard_micro_usd"], b["soft_micro_usd"]) for b in listed["budgets"]] == [
        ("client-a", 2_000_000, 1_000_000)
    ]
    table = gradeq(url, "budgets", "list")
    assert "past soft limit" in table.stdout
    spend = as_json(gradeq(url, "budgets", "spend", "--json"))
    assert spend["by_client"]["client-a"]["total_micro_usd"] == 1_250_050
    human = gradeq(url, "budgets", "spend")
    assert "$1.25" in human.stdout and "2026-12-05" in human.stdout
    assert "removed" in gradeq(url, "budgets", "remove", "client", "client-a").stdout
    assert as_json(gradeq(url, "budgets", "list", "--json"))["budgets"] == []


def test_a_bad_amount_is_a_usage_error(url: str) -> None:  # noqa: F811
    result = gradeq(url, "budgets", "set", "client", "client-a", "--hard", "lots")
    assert result.exit_code == 2


def test_a_submission_past_the_budget_exits_with_its_problem(
    url: str,  # noqa: F811
    request_file: Path,  # noqa: F811
) -> None:
    assert gradeq(url, "budgets", "set", "client", "client-a", "--hard", "0").exit_code == 0
    refused = gradeq(url, "submit", str(request_file), operator=False)
    assert refused.exit_code == 5
    assert "budget-exhausted" in refused.output
