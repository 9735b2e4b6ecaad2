"""The reference frontend in headless Chromium against the local stack: a student submits
an answer, the first answer is lost on the way back, the page retries with the same
Idempotency-Key, and the score with per-criterion feedback appears; one job exists."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests

from localcloud.stack import FRONTEND, LocalStack
from tests.e2e.browser import artifacts_dir
from tests.e2e.operator_stack import OPERATOR_KEY, operator_stack

pytestmark = pytest.mark.e2e

ANSWER = (
    "Photosynthesis happens in the chloroplast: chlorophyll absorbs light, water is split "
    "and oxygen is released."
)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with operator_stack(tmp_path_factory.mktemp("frontend")) as local:
        yield local


def test_a_retried_submission_makes_one_job_and_shows_the_score(
    stack: LocalStack, browser: Any
) -> None:
    from playwright.sync_api import Route, expect

    keys: list[str] = []
    intake_statuses: list[int] = []

    def lose_the_first_answer(route: Route) -> None:
        keys.append(route.request.headers["idempotency-key"])
        if len(keys) == 1:
            # The intake gets the request and creates the job; its answer never arrives.
            intake_statuses.append(route.fetch().status)
            route.fulfill(status=503, headers={"Retry-After": "1"}, body="{}")
        else:
            route.continue_()

    page = browser.new_page(viewport={"width": 1000, "height": 900})
    try:
        page.route("**/api/submissions", lose_the_first_answer)
        replayed: list[str | None] = []
        page.on(
            "response",
            lambda r: (
                replayed.append(r.headers.get("idempotent-replayed"))
                if r.url.endswith("/api/submissions") and r.status == 202
                else None
            ),
        )
        page.goto(stack.config.url(FRONTEND) + "/")
        page.fill("#answer", ANSWER)
        page.click("#submit")
        expect(page.locator("#score")).to_have_text("7.5 / 10", timeout=30_000)
        expect(page.locator("#criteria li")).to_have_count(4)
        expect(page.locator("#criteria li.met")).to_have_count(3)
        expect(page.locator("#criteria li.unmet")).to_contain_text(["describes the Calvin cycle"])
        page.screenshot(path=str(artifacts_dir() / "frontend-graded.png"), full_page=True)
    finally:
        page.close()

    assert intake_statuses == [202]
    assert len(keys) == 2 and keys[0] == keys[1]
    assert replayed == ["true"]  # the retry found the job the lost answer had created
    jobs = requests.get(
        stack.config.url("intake") + "/admin/v1/jobs",
        params={"assignment": "bio-101-hw3"},
        headers={"Authorization": f"Bearer {OPERATOR_KEY}"},
        timeout=10,
    ).json()["jobs"]
    assert len(jobs) == 1
    assert jobs[0]["status"] == "SUCCEEDED"


def test_the_page_never_holds_the_api_key(stack: LocalStack) -> None:
    page = requests.get(stack.config.url(FRONTEND) + "/", timeout=10).text
    script = requests.get(stack.config.url(FRONTEND) + "/static/app.js", timeout=10).text
    assert "e2e-key" not in page + script
    assert "Idempotency-Key" in script
