"""The review page in headless Chromium against the local stack, on the embedded backend and
on the Firestore and Pub/Sub emulators: a grade held until review is overridden by a teacher,
and the student's view and the webhook show the teacher's score. Then a student's work is
erased through the same stack."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from gradeq.client import verify_webhook
from localcloud.emulators import missing_reason
from localcloud.stack import EMBEDDED, GOOGLE_EMULATORS, LocalStack, StackConfig
from tests.e2e.browser import artifacts_dir
from tests.e2e.fast_stack import fast_env
from tests.support.tls import PrivateCa, make_private_ca, tls_receiver

pytestmark = pytest.mark.e2e

REVIEWER_KEY = "e2e-reviewer-key"
#: Every grade of the client is held until a teacher reviews it.
POLICIES = {"school": {"sample_rate": 1, "release": "after_review"}}


@pytest.fixture(scope="module")
def private_ca(tmp_path_factory: pytest.TempPathFactory) -> PrivateCa:
    return make_private_ca(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module", params=[EMBEDDED, GOOGLE_EMULATORS])
def stack(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    private_ca: PrivateCa,
) -> Iterator[LocalStack]:
    """The stack on the embedded backend, then on the Firestore and Pub/Sub emulators."""
    if request.param == GOOGLE_EMULATORS and (reason := missing_reason("firestore", "pubsub")):
        pytest.skip(f"the official emulators are needed for this backend: {reason}")
    root = tmp_path_factory.mktemp("review")
    env = {
        **fast_env(root),
        "GRADEQ_WEBHOOK_CA_BUNDLE": str(private_ca.bundle),
        "GRADEQ_REVIEWER_KEYS": f"school/ms-smith={REVIEWER_KEY}",
        "GRADEQ_CLIENT_REVIEW_POLICIES": json.dumps(POLICIES),
    }
    config = StackConfig.on_free_ports(
        root / "data", backend=request.param, client_id="school", recover_every_s=0, env=env
    )
    with (root / "stack.log").open("w") as log:
        local = LocalStack(config, output=log)
        local.start()
        try:
            yield local
        finally:
            local.stop()


def until(check: Any, what: str, timeout_s: float = 60) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_held_grade_overridden_on_the_review_page_reaches_student_and_webhook(
    stack: LocalStack, browser: Any, private_ca: PrivateCa
) -> None:
    from playwright.sync_api import expect

    headers = {"Authorization": f"Bearer {stack.api_key}", "Idempotency-Key": str(uuid.uuid4())}
    jobs = stack.config.url("intake") + "/v1/grading-jobs"
    with tls_receiver(private_ca) as (hook_url, received):
        body = {
            "submission_id": "sub-review",
            "answer": "Chlorophyll absorbs light.",
            "rubric": ["mentions chlorophyll", "explains photosynthesis"],
            "callback_url": hook_url,
        }
        job_id = requests.post(jobs, json=body, headers=headers, timeout=10).json()["id"]

        def held() -> dict[str, Any] | None:
            job: dict[str, Any] = requests.get(
                f"{jobs}/{job_id}", headers=headers, timeout=10
            ).json()
            return job if job.get("review", {}).get("status") == "held" else None

        job = until(held, "the grade to be held")
        assert job["status"] == "SUCCEEDED" and "result" not in job
        time.sleep(1.0)
        assert received == []  # the webhook waits for the review

        page = browser.new_page(viewport={"width": 1200, "height": 1000})
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        try:
            page.goto(stack.config.url("intake") + "/review/")
            page.fill("#key", REVIEWER_KEY)
            page.click("#login button[type=submit]")
            row = page.locator(f'#queue tr[data-job-id="{job_id}"]')
            expect(row).to_be_visible()
            row.click()
            expect(page.locator("#answer")).to_have_text("Chlorophyll absorbs light.")
            expect(page.locator("#model-score")).to_have_text("5 / 10")
            page.fill("#score", "8.5")
            page.fill("#reason", "explains photosynthesis in other words")
            page.fill("#new-feedback", "Well explained.")
            page.click("#override")
            expect(page.locator("#outcome")).to_contain_text("the student sees 8.5")
            expect(row).to_have_count(0)
            # The agreement plot shows the pair: model 5 against teacher 8.5.
            page.click("#agreement-form button[type=submit]")
            expect(page.locator("#agreement-figures")).to_contain_text("1 reviewed")
            dot = page.locator('#agreement-plot circle.pair[data-model="5"][data-teacher="8.5"]')
            expect(dot).to_have_count(1)
            page.screenshot(path=str(artifacts_dir() / "review-page.png"), full_page=True)
        finally:
            page.close()
        # The page runs under its Content-Security-Policy: nothing of it may be blocked.
        assert [e for e in errors if "Content Security Policy" in e] == []

        hook = until(lambda: received[0] if received else None, "the webhook")
    event = verify_webhook(stack.webhook_secret, hook.body, hook.headers, client_id="school")
    assert event["data"]["job_id"] == job_id and event["data"]["score"] == 8.5
    student = requests.get(f"{jobs}/{job_id}", headers=headers, timeout=10).json()
    assert student["result"]["score"] == 8.5 and student["result"]["feedback"] == "Well explained."
    assert student["review"]["status"] == "reviewed"
    assert len(received) == 1  # one webhook: the completion, published at review time


def test_a_students_work_is_erased_through_the_stack(stack: LocalStack) -> None:
    jobs = stack.config.url("intake") + "/v1/grading-jobs"
    auth = {"Authorization": f"Bearer {stack.api_key}"}
    ids = []
    for n in range(2):
        body = {
            "submission_id": f"erase-{n}",
            "answer": "Chlorophyll absorbs light.",
            "rubric": ["mentions chlorophyll"],
            "student_id": "student-e2e",
        }
        headers = {**auth, "Idempotency-Key": str(uuid.uuid4())}
        ids.append(requests.post(jobs, json=body, headers=headers, timeout=10).json()["id"])
    for job_id in ids:
        until(
            lambda j=job_id: (
                requests.get(f"{jobs}/{j}", headers=auth, timeout=10).json()["status"]
                == "SUCCEEDED"
            ),
            f"job {job_id} to be graded",
        )
    url = stack.config.url("intake") + "/v1/students/student-e2e"
    answer = requests.delete(url, headers=auth, timeout=30)
    assert answer.status_code == 200, answer.text
    assert sorted(answer.json()["removed"]["jobs"]) == sorted(ids)
    assert "logs" in {r["where"] for r in answer.json()["remains"]}
    for job_id in ids:
        assert requests.get(f"{jobs}/{job_id}", headers=auth, timeout=10).status_code == 404
    assert requests.delete(url, headers=auth, timeout=30).json()["removed"]["jobs"] == []
