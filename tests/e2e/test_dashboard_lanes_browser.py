"""The dashboard's lanes in headless Chromium against the local stack: the figures per lane,
and the pause and resume buttons acting on the lane's queue."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests

from localcloud.stack import LocalStack
from tests.e2e.browser import artifacts_dir
from tests.e2e.operator_stack import OPERATOR_KEY, operator_stack

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with operator_stack(tmp_path_factory.mktemp("dashboard-lanes")) as local:
        yield local


def paused(stack: LocalStack) -> dict[str, bool]:
    url = stack.config.url("intake") + "/admin/v1/lanes"
    body = requests.get(url, headers={"Authorization": f"Bearer {OPERATOR_KEY}"}, timeout=10)
    return {row["lane"]: row["paused"] for row in body.json()["lanes"]}


def test_the_dashboard_pauses_and_resumes_a_lane(stack: LocalStack, browser: Any) -> None:
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": 1280, "height": 1100})
    try:
        page.goto(stack.config.url("intake") + "/admin/")
        page.fill("#key", OPERATOR_KEY)
        page.click("#login button[type=submit]")
        # The test stack declares one lane (tests/e2e/fast_stack.py).
        row = page.locator('#lanes tr[data-lane="grading"]')
        expect(row).to_be_visible()
        expect(row.locator("td").nth(1)).to_have_text("running")
        row.locator("button.lane-toggle").click()
        expect(row.locator("td").nth(1)).to_have_text("paused")
        assert paused(stack) == {"grading": True}
        page.screenshot(path=str(artifacts_dir() / "dashboard-lane-paused.png"), full_page=True)
        row.locator("button.lane-toggle").click()
        expect(row.locator("td").nth(1)).to_have_text("running")
        assert paused(stack) == {"grading": False}
    finally:
        page.close()
