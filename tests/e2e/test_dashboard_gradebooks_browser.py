"""The gradebook process of the local stack takes pushes through its push credential, and
the dashboard shows a school's gradebook outage and the grades an LMS refused (headless
Chromium)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import requests

from localcloud.stack import LocalStack
from shared.adapters.embedded.gradebook_marks import SqliteGradebookMarks
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.domain.gradebook import MarkKey, MarkStatus
from tests.e2e.browser import artifacts_dir
from tests.e2e.operator_stack import OPERATOR_KEY, operator_stack
from tests.support.grade_posted import grade_data, push_body

pytestmark = pytest.mark.e2e
T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with operator_stack(tmp_path_factory.mktemp("dashboard-gradebooks")) as local:
        yield local


def test_the_stacks_gradebook_takes_pushes_with_its_credential_only(stack: LocalStack) -> None:
    url = stack.config.url("gradebook") + "/pubsub/push"
    body = push_body(grade_data(1, school="school-without-gradebook"))
    assert requests.post(url, json=body, timeout=10).status_code == 401
    answer = requests.post(
        url, json=body, headers=stack.push_authorization("gradebook"), timeout=10
    )
    assert answer.status_code == 204


def test_the_dashboard_shows_an_outage_and_a_refused_grade(stack: LocalStack, browser: Any) -> None:
    from playwright.sync_api import expect

    marks = SqliteGradebookMarks(SqliteDatabase(stack.config.data_dir / "gradeq.sqlite3"))
    marks.record_busy("school-a", T0, "Classroom answered 503 UNAVAILABLE", None)
    key = MarkKey("school-b", "essay-1", "student-9")
    marks.begin(key, 2, "e2e", T0, timedelta(seconds=60))
    marks.finish(key, 2, "e2e", MarkStatus.REJECTED, "not in the course", T0)
    page = browser.new_page(viewport={"width": 1280, "height": 1100})
    try:
        page.goto(stack.config.url("intake") + "/admin/")
        page.fill("#key", OPERATOR_KEY)
        page.click("#login button[type=submit]")
        row = page.locator('#gradebooks tr[data-school="school-a"]')
        expect(row).to_be_visible()
        expect(row.locator("td").nth(1)).to_have_text("outage")
        expect(row.locator("td").nth(4)).to_have_text("Classroom answered 503 UNAVAILABLE")
        refused = page.locator("#gradebook-rejected tbody tr")
        expect(refused).to_have_count(1)
        expect(refused.locator("td").nth(4)).to_have_text("not in the course")
        page.screenshot(path=str(artifacts_dir() / "dashboard-gradebooks.png"), full_page=True)
    finally:
        page.close()
