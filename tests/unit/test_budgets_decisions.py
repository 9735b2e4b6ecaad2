"""The budget gate's decisions, pinned: which budgets hold a job, what the hold says and
how long it lasts, and when a charge passes a soft limit (the alert monitoring counts)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from shared.adapters.embedded.budget_store import SqliteBudgetStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.clock import FrozenClock
from shared.domain.budgets import Budget, BudgetScope, month_of, next_month_start
from shared.domain.errors import BudgetExhausted
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest, Job
from shared.service_layer.budgets import SOFT_LIMIT_MESSAGE, BudgetGate
from tests.unit.test_review_domain_decisions import machine_in_new_york  # noqa: F401

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


def test_a_refused_job_is_told_which_budget_is_spent_and_to_come_back_in_the_new_month(
    store: SqliteBudgetStore,
) -> None:
    store.set_budget(Budget(BudgetScope.CLIENT, "client-a", 100))
    # Half a second before the new month: a Retry-After of one second, not more.
    gate = BudgetGate(store, FrozenClock(datetime(2026, 12, 31, 23, 59, 59, 500000, tzinfo=UTC)))
    gate.charge(a_job(), costing(100))
    with pytest.raises(BudgetExhausted) as refused:
        gate.admit("client-a", "asg-1")
    assert refused.value.detail == "the client budget of 2026-12 is spent (100 of 100 micro-USD)"
    assert refused.value.retry_after_s == 1
    gate.admit("client-b", "asg-2")  # another school's budget is not this one


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


# --- what a budget may say, and where a hold's month ends ---------------------------------


def _refusal(**fields: object) -> str:
    budget: dict[str, object] = {"scope": BudgetScope.CLIENT, "key": "client-a"}
    budget.update(fields)
    with pytest.raises(ValueError) as refused:
        Budget(**budget)  # type: ignore[arg-type]
    return str(refused.value)


def test_a_budget_without_a_key_or_with_a_negative_hard_limit_is_refused_saying_why() -> None:
    assert _refusal(key="", hard_micro_usd=100) == "a budget names its client or assignment"
    assert _refusal(hard_micro_usd=-1) == "a budget's hard limit is not negative"
    assert Budget(BudgetScope.CLIENT, "client-a", 0).hard_micro_usd == 0


def test_a_soft_limit_runs_from_zero_to_the_hard_limit_inclusive() -> None:
    assert Budget(BudgetScope.CLIENT, "client-a", 100, 0).soft_micro_usd == 0
    assert Budget(BudgetScope.CLIENT, "client-a", 100, 100).soft_micro_usd == 100
    message = "a budget's soft limit is between 0 and its hard limit"
    assert _refusal(hard_micro_usd=100, soft_micro_usd=101) == message
    assert _refusal(hard_micro_usd=100, soft_micro_usd=-1) == message


def test_the_next_month_starts_on_its_first_utc_instant_the_year_turning_after_december() -> None:
    assert next_month_start(datetime(2026, 1, 15, tzinfo=UTC)) == datetime(2026, 2, 1, tzinfo=UTC)
    assert next_month_start(NOW) == datetime(2027, 1, 1, tzinfo=UTC)
    ahead = timezone(timedelta(hours=2))  # 01:00 on 1 March there is still February in UTC
    assert next_month_start(datetime(2026, 3, 1, 1, tzinfo=ahead)) == datetime(
        2026, 3, 1, tzinfo=UTC
    )


@pytest.mark.usefixtures("machine_in_new_york")
def test_the_next_month_follows_the_utc_month_whatever_the_machines_zone() -> None:
    # 03:00 UTC on 1 January is still 31 December in New York.
    at = datetime(2027, 1, 1, 3, tzinfo=UTC)
    assert next_month_start(at) == datetime(2027, 2, 1, tzinfo=UTC)


@pytest.mark.usefixtures("machine_in_new_york")
def test_a_spend_counts_in_its_utc_month_whatever_the_machines_zone() -> None:
    assert month_of(datetime(2027, 1, 1, 3, tzinfo=UTC)) == "2027-01"


def test_a_budget_set_meanwhile_is_applied_only_after_the_refresh(
    store: SqliteBudgetStore,
) -> None:
    clock = FrozenClock(NOW)
    gate = BudgetGate(store, clock, refresh=timedelta(minutes=1))
    assert gate.standings("client-a", None) == []  # the budgets are read now
    store.set_budget(Budget(BudgetScope.CLIENT, "client-a", 100))
    clock.advance(timedelta(seconds=59))
    assert gate.standings("client-a", None) == []  # read less than a refresh ago
    clock.advance(timedelta(seconds=1))
    [standing] = gate.standings("client-a", None)
    assert standing.budget == Budget(BudgetScope.CLIENT, "client-a", 100)


@pytest.mark.parametrize(
    ("refresh", "hold_recheck"),
    [
        (timedelta(0), timedelta(minutes=1)),
        (timedelta(minutes=1), timedelta(0)),
        (timedelta(seconds=-1), timedelta(minutes=1)),
    ],
)
def test_a_gate_that_would_never_reread_or_recheck_is_refused(
    store: SqliteBudgetStore, refresh: timedelta, hold_recheck: timedelta
) -> None:
    with pytest.raises(ValueError) as refused:
        BudgetGate(store, FrozenClock(NOW), refresh=refresh, hold_recheck=hold_recheck)
    assert str(refused.value) == "a budget gate's refresh and hold recheck are positive"


def test_a_gate_rereading_every_microsecond_and_rechecking_every_microsecond_is_allowed(
    store: SqliteBudgetStore,
) -> None:
    tick = timedelta(microseconds=1)
    store.set_budget(Budget(BudgetScope.CLIENT, "client-a", 100))
    gate = BudgetGate(store, FrozenClock(NOW), refresh=tick, hold_recheck=tick)
    gate.charge(a_job(), costing(100))
    held = gate.hold(a_job("job-2"))
    assert held is not None and held.retry_after_s == 1.0  # never under a second
