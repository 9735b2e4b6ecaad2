"""A retried submission while the school's budget is spent: the job accepted before is
answered (not created again), and a key reused with another body is a conflict saying so."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import cast

import pytest

from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.clock import FrozenClock
from shared.domain.errors import BudgetExhausted, IdempotencyConflict
from shared.domain.ids import job_id_for
from shared.domain.job import GradingRequest
from shared.service_layer.budgets import BudgetGate
from shared.service_layer.intake import IntakeService
from tests.fakes import FakePublisher, FakeTaskQueue

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
REQUEST = GradingRequest(submission_id="s", answer="a", rubric="r")
CONFLICT = "this Idempotency-Key was already used with a different request body"


class SwitchedBudgets:
    """A budget gate that refuses every job once `spent` is set."""

    def __init__(self) -> None:
        self.spent = False

    def admit(self, client_id: str, assignment_id: str | None) -> None:
        if self.spent:
            raise BudgetExhausted("the client budget is spent", retry_after_s=60, budget={})


class Spent:
    def __init__(self, tmp_path: Path) -> None:
        self.store = SqliteJobStore(SqliteDatabase(tmp_path / "jobs.sqlite3"))
        self.queue = FakeTaskQueue()
        self.budgets = SwitchedBudgets()
        self.service = IntakeService(
            self.store,
            self.queue,
            FakePublisher(),
            FrozenClock(T0),
            budgets=cast(BudgetGate, self.budgets),
        )


@pytest.fixture
def s(tmp_path: Path) -> Spent:
    return Spent(tmp_path)


def test_a_retry_of_an_accepted_job_is_answered_with_it_and_not_created(s: Spent) -> None:
    first = s.service.submit("client-a", "k", REQUEST)
    assert first.created is True
    s.budgets.spent = True
    again = s.service.submit("client-a", "k", REQUEST)
    assert again.created is False
    assert again.job == s.store.get(job_id_for("client-a", "k")) == first.job


def test_a_reused_key_with_another_body_is_a_conflict_saying_so(s: Spent) -> None:
    s.service.submit("client-a", "k", REQUEST)
    s.budgets.spent = True
    other = GradingRequest(submission_id="s", answer="another answer", rubric="r")
    with pytest.raises(IdempotencyConflict) as refused:
        s.service.submit("client-a", "k", other)
    assert refused.value.detail == CONFLICT
    assert str(refused.value) == CONFLICT
    assert refused.value.status == 422


def test_a_new_key_while_the_budget_is_spent_is_refused(s: Spent) -> None:
    s.budgets.spent = True
    with pytest.raises(BudgetExhausted):
        s.service.submit("client-a", "new", REQUEST)
    assert s.store.get(job_id_for("client-a", "new")) is None
