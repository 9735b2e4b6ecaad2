"""The budget gate's decisions, pinned: which budgets hold a job, what the hold says and
how long it lasts, and when a charge passes a soft limit (the alert monitoring counts)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest

from shared.adapters.embedded.budget_store import SqliteBudgetStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.clock import FrozenClock
from shared.domain.budgets import Budget, BudgetScope
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest, Job
from shared.service_layer.budgets import SOFT_LIMIT_MESSAGE, BudgetGate

NOW = datetime(2026, 12, 20, 12, tzinfo=UTC)


@pytest.fixture
def store(tmp_path: Path) -> SqliteBudgetStore:
    return SqliteBudgetStore(SqliteDatabase(tmp_path / "budgets.db"))


def a_job(job_id: str = "job-1", assignment_id: str | None = "asg-1") -> Job:
    request = GradingRequest(
        submission_id="s", answer="a", rubric=("c",), max_score=10, assignment_id=assignment_id
    )
    return Job.new(job_id, "client-a", request, "fp", NOW)


def costing(cost: int) -> GradeResult:
    return GradeResult(5, 10, "ok", usage={"cost_micro_usd": cost})


def test_a_spent_assignment_budget_holds_its_job_and_says_which_budget(
    store: SqliteBudgetStore,
) -> None:
    store.set_budget(Budget(BudgetScope.ASSIGNMENT, "asg-1", 100))
    gate = BudgetGate(store, FrozenClock(NOW))
    gate.charge(a_job(), costing(100))
    held = gate.hold(a_job("job-2"))
    assert held is not None
    assert held.detail == "the assignment budget of 2026-12 is spent"
    assert gate.hold(a_job("job-3", assignment_id="asg-2")) is None


def test_a_hold_at_the_month_end_lasts_until_the_new_month_even_under_two_seconds(
    store: SqliteBudgetStore,
) -> None:
    store.set_budget(Budget(BudgetScope.CLIENT, "client-a", 100))
    clock = FrozenClock(datetime(2026, 12, 31, 23, 59, 58, 500000, tzinfo=UTC))
    gate = BudgetGate(store, clock)
    gate.charge(a_job(), costing(100))
    held = gate.hold(a_job("job-2"))
    assert held is not None and held.retry_after_s == 1.5


def _alerts(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage() == SOFT_LIMIT_MESSAGE]


def test_a_charge_reaching_an_assignment_soft_limit_exactly_alerts_once(
    store: SqliteBudgetStore, caplog: pytest.LogCaptureFixture
) -> None:
    store.set_budget(Budget(BudgetScope.ASSIGNMENT, "asg-1", 10_000, 1000))
    gate = BudgetGate(store, FrozenClock(NOW))
    with caplog.at_level(logging.WARNING):
        gate.charge(a_job("job-1"), costing(600))
        assert _alerts(caplog) == []
        gate.charge(a_job("job-2"), costing(400))  # 600 -> 1000: reaches the soft limit
        [alert] = _alerts(caplog)
        assert alert.__dict__["key"] == "asg-1" and alert.__dict__["spent_micro_usd"] == 1000
        gate.charge(a_job("job-3"), costing(1))  # 1000 -> 1001: was already there
        assert len(_alerts(caplog)) == 1
