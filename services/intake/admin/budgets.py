"""The admin API's budgets and spend (operator only).

- `GET /admin/v1/budgets`: every budget with this month's spend against it;
- `PUT /admin/v1/budgets/{client|assignment}/{key}`: set or raise one
  (`{"hard_micro_usd": n, "soft_micro_usd": m}`, micro-dollars; a raise takes effect
  within a minute and releases held jobs at their next look);
- `DELETE /admin/v1/budgets/{scope}/{key}`;
- `GET /admin/v1/spend?month=YYYY-MM`: each client's spend of the month, in total and
  per UTC day (the dashboard plots it).
"""

from __future__ import annotations

import re
from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request

from services.intake.admin.auth import OperatorAuthenticator
from shared.domain.budgets import Budget, BudgetScope, BudgetStanding, month_of
from shared.domain.errors import GradeqError, ValidationFailed
from shared.ports import BudgetStore, Clock

budgets_api = Blueprint("admin_budgets", __name__, url_prefix="/admin/v1")

_MONTH = re.compile(r"^\d{4}-(0[1-9]|1[0-2])$")
#: A budget above this (a million dollars a month) is a typo, not a budget.
MAX_BUDGET_MICRO_USD = 10**12


class BudgetNotFound(GradeqError):
    slug = "budget-not-found"
    title = "No such budget"
    status = 404


class BudgetsNotServed(GradeqError):
    slug = "budgets-not-served"
    title = "Budgets are not served by this deployment"
    status = 501


@budgets_api.before_request
def _authenticate() -> None:
    auth: OperatorAuthenticator = current_app.extensions["gradeq.operator_auth"]
    request.environ["gradeq.operator"] = auth.operator()


def _store() -> BudgetStore:
    store: BudgetStore | None = current_app.extensions.get("gradeq.budgets")
    if store is None:
        raise BudgetsNotServed("this deployment has no budget store")
    return store


def _now_month() -> str:
    clock: Clock = current_app.extensions["gradeq.budget_clock"]
    return month_of(clock.now())


def _invalid(field: str, message: str) -> ValidationFailed:
    return ValidationFailed(f"{field}: {message}", errors=[{"field": field, "message": message}])


def _scope(text: str) -> BudgetScope:
    try:
        return BudgetScope(text)
    except ValueError:
        raise _invalid("scope", "expected client or assignment") from None


def _micros(body: dict[str, Any], name: str, *, required: bool) -> int | None:
    value = body.get(name)
    if value is None and not required:
        return None
    if type(value) is not int or not 0 <= value <= MAX_BUDGET_MICRO_USD:
        raise _invalid(name, f"expected an integer of micro-USD, 0 to {MAX_BUDGET_MICRO_USD}")
    return value


def _standing(store: BudgetStore, budget: Budget, month: str) -> dict[str, Any]:
    spent = store.spent(budget.scope, budget.key, month)
    return BudgetStanding(budget, month, spent).to_dict()


@budgets_api.get("/budgets")
def list_budgets() -> Response:
    store, month = _store(), _now_month()
    return jsonify(
        {"month": month, "budgets": [_standing(store, b, month) for b in store.budgets()]}
    )


@budgets_api.put("/budgets/<scope>/<path:key>")
def put_budget(scope: str, key: str) -> Response:
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        raise _invalid("", "the body must be a JSON object")
    hard = _micros(body, "hard_micro_usd", required=True)
    soft = _micros(body, "soft_micro_usd", required=False)
    assert hard is not None
    try:
        budget = Budget(_scope(scope), key, hard, soft)
    except ValueError as exc:
        raise _invalid("soft_micro_usd", str(exc)) from None
    store = _store()
    store.set_budget(budget)
    return jsonify(_standing(store, budget, _now_month()))


@budgets_api.delete("/budgets/<scope>/<path:key>")
def delete_budget(scope: str, key: str) -> Response:
    if not _store().remove_budget(_scope(scope), key):
        raise BudgetNotFound(f"no {scope} budget for {key}")
    return Response(status=204)


@budgets_api.get("/spend")
def spend() -> Response:
    month = request.args.get("month") or _now_month()
    if not _MONTH.match(month):
        raise _invalid("month", "expected YYYY-MM")
    days = _store().daily_spend(month)
    return jsonify(
        {
            "month": month,
            "currency": "USD",
            "unit": "micro_usd",
            "by_client": {
                client: {"total_micro_usd": sum(per_day.values()), "days": per_day}
                for client, per_day in days.items()
            },
        }
    )
