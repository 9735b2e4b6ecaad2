"""The reference frontend's class page in headless Chromium against the local stack: a
class's answers arrive in one batch, and the page's progress moves to graded with the
score histogram of the whole class, and what the page reads of the assignment never holds
its rubric."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests

from localcloud.stack import FRONTEND, LocalStack
from tests.e2e.browser import artifacts_dir
from tests.e2e.operator_stack import operator_stack

pytestmark = pytest.mark.e2e

CLASS_SIZE = 12


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with operator_stack(tmp_path_factory.mktemp("class")) as local:
        yield local


def test_the_class_page_follows_a_batch_to_graded_with_its_histogram(
    stack: LocalStack, browser: Any
) -> None:
    from playwright.sync_api import expect

    intake = stack.config.url("intake")
    auth = {"Authorization": f"Bearer {stack.api_key}"}
    created = requests.post(
        f"{intake}/v1/assignments",
        json={"title": "Photosynthesis", "rubric": ["chloroplast", "chlorophyll"], "max_score": 10},
        headers={**auth, "Idempotency-Key": "class-page"},
        timeout=30,
    )
    assert created.status_code == 201, created.text
    assignment_id = created.json()["id"]
    answers = [
        {"submission_id": f"s{i}", "answer": "the chloroplast" + (" and chlorophyll" * (i % 2))}
        for i in range(CLASS_SIZE)
    ]
    batch = requests.post(
        f"{intake}/v1/assignments/{assignment_id}/submissions:batch",
        json={"answers": answers},
        headers=auth,
        timeout=60,
    )
    assert batch.json()["accepted"] == CLASS_SIZE, batch.text

    page = browser.new_page(viewport={"width": 1000, "height": 900})
    read: list[Any] = []
    page.on("response", lambda r: read.append(r) if "/api/assignments/" in r.url else None)
    try:
        page.goto(f"{stack.config.url(FRONTEND)}/class?assignment={assignment_id}")
        expect(page.locator("#title")).to_have_text("Photosynthesis", timeout=30_000)
        expect(page.locator("#state")).to_have_text("graded", timeout=90_000)
        expect(page.locator("#final")).to_have_text(str(CLASS_SIZE))
        bars = page.locator("#histogram li")
        expect(bars).to_have_count(11)
        counts = [int(c) for c in bars.evaluate_all("(bars) => bars.map(b => b.dataset.count)")]
        # Half met one criterion of two (5 of 10), half both (10 of 10).
        assert counts[5] == counts[10] == CLASS_SIZE // 2 and sum(counts) == CLASS_SIZE
        expect(page.locator("#mean")).to_have_text("7.50")
        # The visitor is anonymous: the page is shown the title and progress, no rubric.
        bodies = [r.json() for r in read if r.ok]
        assert bodies and all(set(b) == {"id", "title", "max_score", "progress"} for b in bodies)
        assert all("chlorophyll" not in r.text() for r in read)
        page.screenshot(path=str(artifacts_dir() / "frontend-class.png"), full_page=True)
    finally:
        page.close()


def test_the_class_page_keeps_following_after_a_busy_answer(
    stack: LocalStack, browser: Any
) -> None:
    # A 503 with Retry-After (a busy intake) is asked again; it does not end the page.
    from playwright.sync_api import expect

    intake = stack.config.url("intake")
    auth = {"Authorization": f"Bearer {stack.api_key}"}
    created = requests.post(
        f"{intake}/v1/assignments",
        json={"title": "Respiration", "rubric": ["mitochondria"], "max_score": 10},
        headers={**auth, "Idempotency-Key": "class-page-busy"},
        timeout=30,
    )
    assert created.status_code == 201, created.text
    assignment_id = created.json()["id"]
    batch = requests.post(
        f"{intake}/v1/assignments/{assignment_id}/submissions:batch",
        json={"answers": [{"submission_id": "s0", "answer": "the mitochondria"}]},
        headers=auth,
        timeout=60,
    )
    assert batch.json()["accepted"] == 1, batch.text

    busy: list[str] = []

    def first_busy(route: Any) -> None:
        if not busy:
            busy.append(route.request.url)
            route.fulfill(
                status=503,
                headers={"Retry-After": "1", "Content-Type": "application/problem+json"},
                body='{"title": "Service Unavailable", "status": 503, "detail": "busy"}',
            )
        else:
            route.continue_()

    page = browser.new_page()
    try:
        page.route("**/api/assignments/*", first_busy)
        page.goto(f"{stack.config.url(FRONTEND)}/class?assignment={assignment_id}")
        expect(page.locator("#state")).to_have_text("graded", timeout=60_000)
        expect(page.locator("#error")).to_have_text("")
        assert len(busy) == 1
    finally:
        page.close()
