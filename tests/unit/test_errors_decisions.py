"""What a spent budget's problem carries: the detail given, the budget and Retry-After."""

from __future__ import annotations

from shared.domain.errors import BudgetExhausted


def test_a_spent_budget_carries_its_detail_budget_and_retry_after() -> None:
    budget = {"scope": "client", "hard_limit_usd": 10.0, "spent_usd": 10.2}
    error = BudgetExhausted("the client budget of 2026-12 is spent", 3600, budget)
    assert error.detail == "the client budget of 2026-12 is spent"
    assert str(error) == "the client budget of 2026-12 is spent"
    assert error.extensions == {"budget": budget}
    assert error.retry_after_s == 3600
    assert (error.status, error.type_uri) == (429, "https://gradeq.dev/problems/budget-exhausted")
