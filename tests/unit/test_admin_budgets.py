"""The admin API's budgets and spend: set, raise and remove a budget, read each budget's
standing and each client's spend per day of a month."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest
from flask.testing import FlaskClient

from services.intake.app import create_app
from shared.adapters.embedded.budget_store import SqliteBudgetStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.budgets import Charge
from tests.unit.test_admin_api import admin_settings as admin_settings
from tests.unit.test_admin_api import auth
from tests.unit.test_intake_api import assert_problem

DEC = datetime(2026, 12, 3, 10, tzinfo=UTC)


@pytest.fixture
def store(settings: Settings) -> SqliteBudgetStore:
    return SqliteBudgetStore(SqliteDatabase(settings.database_path))


@pytest.fixture
def admin(admin_settings: Settings, adapters: Adapters, store: SqliteBudgetStore) -> FlaskClient:
    with_budgets = dataclasses.replace(adapters, budgets=store)
    return create_app(admin_settings, with_budgets, FrozenClock(DEC)).test_client()


def test_a_budget_is_set_raised_listed_with_its_spend_and_removed(
    admin: FlaskClient, store: SqliteBudgetStore
) -> None:
    store.charge(Charge("j1", "client-a", None, DEC, 1500))
    put = admin.put(
        "/admin/v1/budgets/client/client-a",
        json={"hard_micro_usd": 2000, "soft_micro_usd": 1000},
        headers=auth(),
    )
    assert put.status_code == 200
    assert put.get_json() == {
        "scope": "client",
        "key": "client-a",
        "hard_micro_usd": 2000,
        "soft_micro_usd": 1000,
        "month": "2026-12",
        "spent_micro_usd": 1500,
        "exhausted": False,
        "past_soft": True,
    }
    admin.put("/admin/v1/budgets/client/client-a", json={"hard_micro_usd": 9000}, headers=auth())
    listed = admin.get("/admin/v1/budgets", headers=auth()).get_json()
    assert listed["month"] == "2026-12"
    [only] = listed["budgets"]
    assert (only["hard_micro_usd"], only["soft_micro_usd"]) == (9000, None)
    assert admin.delete("/admin/v1/budgets/client/client-a", headers=auth()).status_code == 204
    gone = admin.delete("/admin/v1/budgets/client/client-a", headers=auth())
    assert_problem(gone, 404, "budget-not-found")


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/admin/v1/budgets/team/x", {"hard_micro_usd": 1}, "scope"),
        ("/admin/v1/budgets/client/x", {"hard_micro_usd": -1}, "hard_micro_usd"),
        ("/admin/v1/budgets/client/x", {"hard_micro_usd": 1.5}, "hard_micro_usd"),
        (
            "/admin/v1/budgets/client/x",
            {"hard_micro_usd": 10, "soft_micro_usd": 11},
            "soft_micro_usd",
        ),
    ],
)
def test_an_invalid_budget_is_refused(
    admin: FlaskClient, path: str, body: dict[str, object], field: str
) -> None:
    problem = assert_problem(admin.put(path, json=body, headers=auth()), 400, "validation-error")
    assert problem["errors"][0]["field"] == field


def test_the_spend_of_a_month_per_client_and_day(
    admin: FlaskClient, store: SqliteBudgetStore
) -> None:
    store.charge(Charge("j1", "client-a", "hw-1", DEC, 100))
    store.charge(Charge("j2", "client-a", None, datetime(2026, 12, 4, tzinfo=UTC), 50))
    store.charge(Charge("j3", "client-b", None, DEC, 7))
    store.charge(Charge("j4", "client-b", None, datetime(2026, 11, 30, tzinfo=UTC), 9))
    spend = admin.get("/admin/v1/spend", headers=auth()).get_json()
    assert spend == {
        "month": "2026-12",
        "currency": "USD",
        "unit": "micro_usd",
        "by_client": {
            "client-a": {"total_micro_usd": 150, "days": {"2026-12-03": 100, "2026-12-04": 50}},
            "client-b": {"total_micro_usd": 7, "days": {"2026-12-03": 7}},
        },
    }
    november = admin.get("/admin/v1/spend?month=2026-11", headers=auth()).get_json()
    assert november["by_client"] == {"client-b": {"total_micro_usd": 9, "days": {"2026-11-30": 9}}}
    bad = admin.get("/admin/v1/spend?month=2026-13", headers=auth())
    assert_problem(bad, 400, "validation-error")


def test_budgets_need_an_operator(admin: FlaskClient) -> None:
    from tests.unit.conftest import API_KEY

    response = admin.get("/admin/v1/spend", headers={"Authorization": f"Bearer {API_KEY}"})
    assert response.status_code in (401, 403)
