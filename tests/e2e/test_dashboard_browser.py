"""The operator dashboard in headless Chromium against the local stack: it shows a failed
job, and its replay button moves the job back to PENDING and on to SUCCEEDED."""

from __future__ import annotations

import time
import uuid
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
    with operator_stack(tmp_path_factory.mktemp("dashboard")) as local:
        yield local


def failed_job(stack: LocalStack) -> str:
    """Submit a job the offline grader refuses once, and wait until it has FAILED."""
    body = {
        "submission_id": "sub-dashboard",
        "answer": "Chlorophyll absorbs light for photosynthesis.",
        "rubric": ["mentions chlorophyll", "mentions photosynthesis"],
        "metadata": {"simulate": {"failure": "permanent", "times": 1}},
    }
    headers = {"Authorization": f"Bearer {stack.api_key}", "Idempotency-Key": str(uuid.uuid4())}
    url = stack.config.url("intake") + "/v1/grading-jobs"
    job_id: str = requests.post(url, json=body, headers=headers, timeout=10).json()["id"]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        job = requests.get(f"{url}/{job_id}", headers=headers, timeout=10).json()
        if job["status"] == "FAILED":
            return job_id
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} did not fail: {job}")


def test_the_dashboard_shows_a_failed_job_and_replays_it(stack: LocalStack, browser: Any) -> None:
    from playwright.sync_api import expect

    job_id = failed_job(stack)
    page = browser.new_page(viewport={"width": 1280, "height": 1100})
    # The page runs under its Content-Security-Policy: anything it blocks is reported here.
    console_errors: list[str] = []
    page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
    try:
        page.goto(stack.config.url("intake") + "/admin/")
        page.fill("#key", OPERATOR_KEY)
        page.click("#login button[type=submit]")
        row = page.locator(f'#failed tr[data-job-id="{job_id}"]')
        expect(row).to_be_visible()
        # The key lives in the script's memory only.
        expect(page.locator("#key")).to_have_value("")
        stored = page.evaluate(
            "() => [sessionStorage.length, localStorage.length, document.cookie]"
        )
        assert stored == [0, 0, ""]
        # The shared page kit holds only its two functions, frozen: nothing that keeps a key.
        kit = page.evaluate("() => [Object.isFrozen(pageKit), Object.keys(pageKit)]")
        assert kit == [True, ["el", "caller"]]
        expect(row.locator("td.error")).to_contain_text("grading-permanent")
        expect(page.locator('#counts [data-status="FAILED"] [data-count]')).to_have_text("1")
        expect(page.locator("#chart svg")).to_be_visible()
        row.locator("button.link").click()
        expect(page.locator("#history tbody td.outcome")).to_have_text(["failed"])
        page.screenshot(path=str(artifacts_dir() / "dashboard-failed-job.png"), full_page=True)

        with page.expect_response(lambda r: r.url.endswith(f"/jobs/{job_id}/replay")) as answer:
            row.locator("button.replay").click()
        replayed = answer.value.json()
        assert answer.value.status == 200
        assert replayed["replayed"] is True
        assert replayed["job"]["status"] == "PENDING"
        assert replayed["job"]["generation"] == 1

        expect(page.locator("#detail-status")).to_have_text("SUCCEEDED", timeout=30_000)
        expect(page.locator("#replays li")).to_contain_text(["by ops: generation 1"])
        expect(page.locator("#history tbody td.outcome")).to_have_text(["failed", "succeeded"])
        expect(row).to_have_count(0, timeout=15_000)
        page.screenshot(path=str(artifacts_dir() / "dashboard-replayed-job.png"), full_page=True)
        assert [e for e in console_errors if "Content Security Policy" in e] == []

        page.reload()  # a reload forgets the key: the board stays hidden until it is typed
        expect(page.locator("#board")).to_be_hidden()
    finally:
        page.close()


def graded_class(stack: LocalStack, size: int) -> str:
    """Create an assignment, submit `size` answers in one batch, wait until all are final."""
    intake = stack.config.url("intake")
    auth = {"Authorization": f"Bearer {stack.api_key}"}
    created = requests.post(
        f"{intake}/v1/assignments",
        json={"title": "Leaves", "rubric": ["chloroplast", "chlorophyll"], "max_score": 10},
        headers={**auth, "Idempotency-Key": str(uuid.uuid4())},
        timeout=30,
    )
    assert created.status_code == 201, created.text
    assignment_id: str = created.json()["id"]
    answers = [
        {"submission_id": f"s{i}", "answer": "the chloroplast" + (" and chlorophyll" * (i % 2))}
        for i in range(size)
    ]
    url = f"{intake}/v1/assignments/{assignment_id}"
    batch = requests.post(f"{url}/submissions:batch", json={"answers": answers}, headers=auth)
    assert batch.json()["accepted"] == size, batch.text
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        progress = requests.get(url, headers=auth, timeout=10).json()["progress"]
        if progress["final"] == size:
            return assignment_id
        time.sleep(0.3)
    raise AssertionError(f"assignment {assignment_id} not graded: {progress}")


def test_the_dashboard_shows_an_assignment_with_its_score_histogram(
    stack: LocalStack, browser: Any
) -> None:
    from playwright.sync_api import expect

    assignment_id = graded_class(stack, 6)
    page = browser.new_page(viewport={"width": 1280, "height": 1100})
    console_errors: list[str] = []
    page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
    try:
        page.goto(stack.config.url("intake") + "/admin/")
        page.fill("#key", OPERATOR_KEY)
        page.click("#login button[type=submit]")
        expect(page.locator("#board")).to_be_visible()
        page.fill("#assignment-id", assignment_id)
        page.click("#assignment-form button[type=submit]")
        expect(page.locator("#assignment-title")).to_have_text("Leaves")
        expect(page.locator("#assignment-final")).to_have_text("6")
        expect(page.locator("#assignment-submissions")).to_have_text("6")
        bars = page.locator("#histogram rect")
        # Tenths of the maximum, [0, 10%) to [90%, 100%), and the full score.
        expect(bars).to_have_count(11)
        counts = [int(bars.nth(i).get_attribute("data-count") or "0") for i in range(11)]
        # The offline grader scores a criterion per rubric line found: 3 answers name one of
        # two criteria (half the score), 3 name both (the full score).
        assert counts[5] == 3 and counts[10] == 3 and sum(counts) == 6, counts
        page.screenshot(path=str(artifacts_dir() / "dashboard-assignment.png"))
    finally:
        page.close()
    assert console_errors == []
