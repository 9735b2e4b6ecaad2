"""Monthly spending budgets per client and per assignment, and where a spend stands.

A budget is in millionths of the price table's currency (micro-dollars, as the cost of
a grading is recorded). Past its soft limit an alert fires (a log line that a log-based
metric counts); at or past its hard limit the client's new submissions are refused and
its queued work is held until the month ends or the budget is raised. Months are UTC
calendar months, named "YYYY-MM".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

#: The usage entry that holds a grading's cost, in millionths of the price table's
#: currency (USD).
COST_KEY = "cost_micro_usd"


class BudgetScope(StrEnum):
    CLIENT = "client"
    ASSIGNMENT = "assignment"


@dataclass(frozen=True)
class Budget:
    """What one client or assignment may spend per month (micro-dollars)."""

    scope: BudgetScope
    key: str
    hard_micro_usd: int
    #: Past this, an alert; None: no soft limit.
    soft_micro_usd: int | None = None

    def __post_init__(self) -> None:
        if not self.key:
            raise ValueError("a budget names its client or assignment")
        if self.hard_micro_usd < 0:
            raise ValueError("a budget's hard limit is not negative")
        if self.soft_micro_usd is not None and not 0 <= self.soft_micro_usd <= self.hard_micro_usd:
            raise ValueError("a budget's soft limit is between 0 and its hard limit")

    def to_dict(self) -> dict[str, Any]:
        return {
            "scope": self.scope.value,
            "key": self.key,
            "hard_micro_usd": self.hard_micro_usd,
            "soft_micro_usd": self.soft_micro_usd,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Budget:
        soft = data.get("soft_micro_usd")
        return cls(
            scope=BudgetScope(data["scope"]),
            key=str(data["key"]),
            hard_micro_usd=int(data["hard_micro_usd"]),
            soft_micro_usd=None if soft is None else int(soft),
        )


@dataclass(frozen=True)
class Charge:
    """One finished grading's cost, counted once per job against its budgets."""

    job_id: str
    client_id: str
    assignment_id: str | None
    at: datetime
    micro_usd: int

    @property
    def month(self) -> str:
        return month_of(self.at)

    @property
    def day(self) -> str:
        return self.at.astimezone(UTC).date().isoformat()


@dataclass(frozen=True)
class BudgetStanding:
    """A budget against this month's spend."""

    budget: Budget
    month: str
    spent_micro_usd: int

    @property
    def exhausted(self) -> bool:
        return self.spent_micro_usd >= self.budget.hard_micro_usd

    @property
    def past_soft(self) -> bool:
        soft = self.budget.soft_micro_usd
        return soft is not None and self.spent_micro_usd >= soft

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.budget.to_dict(),
            "month": self.month,
            "spent_micro_usd": self.spent_micro_usd,
            "exhausted": self.exhausted,
            "past_soft": self.past_soft,
        }


def month_of(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m")


def next_month_start(at: datetime) -> datetime:
    """The first instant of the UTC month after `at`'s."""
    at = at.astimezone(UTC)
    year, month = (at.year + 1, 1) if at.month == 12 else (at.year, at.month + 1)
    return datetime(year, month, 1, tzinfo=UTC)
