"""BudgetStore on SQLite: the budgets, and one row per charged job (spend is their sum)."""

from __future__ import annotations

from shared.adapters.embedded.sqlite import SqliteDatabase, unavailable_on_error
from shared.domain.budgets import Budget, BudgetScope, Charge

SCHEMA = """
CREATE TABLE IF NOT EXISTS budgets (
    scope TEXT NOT NULL,
    key TEXT NOT NULL,
    hard_micro_usd INTEGER NOT NULL,
    soft_micro_usd INTEGER,
    PRIMARY KEY (scope, key)
);
CREATE TABLE IF NOT EXISTS budget_charges (
    job_id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    assignment_id TEXT,
    month TEXT NOT NULL,
    day TEXT NOT NULL,
    micro_usd INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS budget_charges_client ON budget_charges (client_id, month);
CREATE INDEX IF NOT EXISTS budget_charges_assignment ON budget_charges (assignment_id, month);
CREATE INDEX IF NOT EXISTS budget_charges_month ON budget_charges (month, client_id, day);
"""

_COLUMN = {BudgetScope.CLIENT: "client_id", BudgetScope.ASSIGNMENT: "assignment_id"}


class SqliteBudgetStore:
    """BudgetStore in the shared SQLite file."""

    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db
        db.ensure_schema(SCHEMA)

    def set_budget(self, budget: Budget) -> None:
        with unavailable_on_error("set a budget"), self._db.transaction() as conn:
            conn.execute(
                "INSERT INTO budgets (scope, key, hard_micro_usd, soft_micro_usd)"
                " VALUES (?, ?, ?, ?) ON CONFLICT (scope, key) DO UPDATE SET"
                " hard_micro_usd = excluded.hard_micro_usd,"
                " soft_micro_usd = excluded.soft_micro_usd",
                (budget.scope.value, budget.key, budget.hard_micro_usd, budget.soft_micro_usd),
            )

    def remove_budget(self, scope: BudgetScope, key: str) -> bool:
        with unavailable_on_error("remove a budget"), self._db.transaction() as conn:
            found = conn.execute(
                "DELETE FROM budgets WHERE scope = ? AND key = ?", (scope.value, key)
            )
            return found.rowcount == 1

    def budgets(self) -> list[Budget]:
        with unavailable_on_error("list budgets"):
            rows = (
                self._db.connection()
                .execute(
                    "SELECT scope, key, hard_micro_usd, soft_micro_usd FROM budgets"
                    " ORDER BY scope, key"
                )
                .fetchall()
            )
        return [Budget.from_dict(dict(row)) for row in rows]

    def charge(self, charge: Charge) -> bool:
        with unavailable_on_error("count a grading's cost"), self._db.transaction() as conn:
            counted = conn.execute(
                "INSERT INTO budget_charges"
                " (job_id, client_id, assignment_id, month, day, micro_usd)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (job_id) DO NOTHING",
                (
                    charge.job_id,
                    charge.client_id,
                    charge.assignment_id,
                    charge.month,
                    charge.day,
                    charge.micro_usd,
                ),
            )
            return counted.rowcount == 1

    def spent(self, scope: BudgetScope, key: str, month: str) -> int:
        column = _COLUMN[scope]
        with unavailable_on_error("read a spend"):
            row = (
                self._db.connection()
                .execute(
                    f"SELECT COALESCE(SUM(micro_usd), 0) FROM budget_charges"  # noqa: S608
                    f" WHERE {column} = ? AND month = ?",
                    (key, month),
                )
                .fetchone()
            )
        return int(row[0])

    def daily_spend(self, month: str) -> dict[str, dict[str, int]]:
        with unavailable_on_error("read the daily spend"):
            rows = (
                self._db.connection()
                .execute(
                    "SELECT client_id, day, SUM(micro_usd) FROM budget_charges"
                    " WHERE month = ? GROUP BY client_id, day ORDER BY client_id, day",
                    (month,),
                )
                .fetchall()
            )
        out: dict[str, dict[str, int]] = {}
        for client_id, day, micros in rows:
            out.setdefault(client_id, {})[day] = int(micros)
        return out
