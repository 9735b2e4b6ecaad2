"""The operator dashboard's spend plot in headless Chromium against the local stack: each
client's spend of the month as a cumulative line, and the budgets table with a spent
budget marked, under the page's Content-Security-Policy."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import requests

from localcloud.stack import LocalStack
from shared.adapters.embedded.budget_store import SqliteBudgetStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.config.settings import Settings
from shared.domain.budgets import Charge
from tests.e2e.browser import artifacts_dir
from tests.e2e.operator_stack import OPERATOR_KEY, operator_stack

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with operator_stack(tmp_path_factory.mktemp("spend")) as local:
        yield local


def test_the_dashboard_plots_spend_per_client_and_marks_a_spent_budget(
    stack: LocalStack, browser: Any
) -> None:
    from playwright.sync_api import expect

    # Gradings graded earlier this month, as the worker counts them.
    store = SqliteBudgetStore(
        SqliteDatabase(Settings(data_dir=stack.config.data_dir).database_path)
    )
    now = datetime.now(UTC)
    first = now.replace(day=1, hour=1)
    for n, (client, at, micros) in enumerate(
        [("school-a", first, 400_000), ("school-a", now, 900_000), ("school-b", now, 250_000)]
    ):
        assert store.charge(Charge(f"job-{n}", client, None, at, micros))
    admin = stack.config.url("intake") + "/admin/v1"
    auth = {"Authorization": f"Bearer {OPERATOR_KEY}"}
    put = requests.put(
        f"{admin}/budgets/client/school-a",
        json={"hard_micro_usd": 1_000_000, "soft_micro_usd": 500_000},
        headers=auth,
        timeout=10,
    )
    assert put.status_code == 200, put.text

    page = browser.new_page(viewport={"width": 1280, "height": 1400})
    console_errors: list[str] = []
    page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
    try:
        page.goto(stack.config.url("intake") + "/admin/")
        page.fill("#key", OPERATOR_KEY)
        page.click("#login button[type=submit]")
        expect(page.locator("#spend-chart svg")).to_be_visible()
        for client in ("school-a", "school-b"):
            line = page.locator(f'#spend-chart path[data-client="{client}"]')
            expect(line).to_have_count(1)
            assert " L" in (line.get_attribute("d") or "")  # from nothing, up to the spend
        expect(page.locator("#spend-legend")).to_contain_text("school-a $1.30")
        expect(page.locator("#spend-legend")).to_contain_text("school-b $0.25")
        row = page.locator("#budgets tbody tr.exhausted")
        expect(row).to_contain_text("client school-a")
        expect(row).to_contain_text("spent: work held")
        page.screenshot(path=str(artifacts_dir() / "dashboard-spend.png"), full_page=True)
        assert [e for e in console_errors if "Content Security Policy" in e] == []
    finally:
        page.close()
