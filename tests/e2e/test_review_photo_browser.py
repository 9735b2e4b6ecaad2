"""The review page in headless Chromium on a photographed answer, on the embedded backend
and on the Firestore, Pub/Sub and Cloud Storage emulators: the reviewer sees the photo
(fetched by the page with the reviewer's key, shown under the page's Content-Security-
Policy, never through a public URL), then overrides the grade."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from localcloud.emulators import missing_reason
from localcloud.stack import EMBEDDED, GOOGLE_EMULATORS, LocalStack, StackConfig
from tests.e2e.browser import artifacts_dir
from tests.e2e.fast_stack import fast_env
from tests.e2e.test_review_browser import until
from tests.support import files

pytestmark = pytest.mark.e2e

REVIEWER_KEY = "e2e-photo-reviewer-key"
#: Every grade of the client is held for a teacher.
POLICIES = {"school": {"sample_rate": 1}}
PHOTO = files.png(48, 32)


@pytest.fixture(scope="module", params=[EMBEDDED, GOOGLE_EMULATORS])
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalStack]:
    """The stack on the embedded backend, then on the emulators (Cloud Storage's too)."""
    if request.param == GOOGLE_EMULATORS and (
        reason := missing_reason("firestore", "pubsub", "storage")
    ):
        pytest.skip(f"the emulators are needed for this backend: {reason}")
    root = tmp_path_factory.mktemp("review-photo")
    env = {
        **fast_env(root),
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


def _photographed_answer(stack: LocalStack) -> str:
    """A job whose answer is a line of text and a photographed page, held for review."""
    intake = stack.config.url("intake")
    auth = {"Authorization": f"Bearer {stack.api_key}"}
    grant = requests.post(
        f"{intake}/v1/uploads",
        json={"content_type": "image/png", "size": len(PHOTO)},
        headers=auth,
        timeout=10,
    )
    assert grant.status_code == 201, grant.text
    upload = grant.json()
    put = requests.put(upload["upload_url"], data=PHOTO, headers=upload["headers"], timeout=10)
    assert put.status_code < 300, put.text
    body = {
        "submission_id": "sub-photo",
        "answer": "Chlorophyll absorbs light (working on the photo).",
        "rubric": ["mentions chlorophyll", "explains photosynthesis"],
        "files": [
            {
                "upload_id": upload["upload_id"],
                "content_type": "image/png",
                "size": len(PHOTO),
                "name": "page-1.png",
            }
        ],
    }
    headers = {**auth, "Idempotency-Key": str(uuid.uuid4())}
    sent = requests.post(f"{intake}/v1/grading-jobs", json=body, headers=headers, timeout=10)
    assert sent.status_code == 202, sent.text
    job_id: str = sent.json()["id"]

    def held() -> bool:
        job = requests.get(f"{intake}/v1/grading-jobs/{job_id}", headers=auth, timeout=10).json()
        return bool(job.get("review", {}).get("status") == "held")

    until(held, "the photographed answer's grade to be held")
    return job_id


def test_the_reviewer_sees_the_photo_and_overrides_the_grade(
    stack: LocalStack, browser: Any
) -> None:
    from playwright.sync_api import expect

    job_id = _photographed_answer(stack)
    page = browser.new_page(viewport={"width": 1200, "height": 1000})
    errors: list[str] = []
    files_fetched: list[dict[str, Any]] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)

    def record(response: Any) -> None:
        if "/files/" in response.url:
            files_fetched.append(
                {"url": response.url, "status": response.status, **response.request.headers}
            )

    page.on("response", record)
    try:
        page.goto(stack.config.url("intake") + "/review/")
        page.fill("#key", REVIEWER_KEY)
        page.click("#login button[type=submit]")
        row = page.locator(f'#queue tr[data-job-id="{job_id}"]')
        expect(row).to_be_visible()
        row.click()
        expect(page.locator("#answer")).to_contain_text("Chlorophyll absorbs light")
        photo = page.locator("#files img.answer-file")
        expect(photo).to_have_count(1)
        expect(photo).to_have_attribute("alt", "page-1.png")
        expect(photo).to_be_visible()
        # Decoded: the bytes reached the page and the policy let the image show.
        width = photo.evaluate("img => img.complete ? img.naturalWidth : 0")
        height = photo.evaluate("img => img.naturalHeight")
        assert (width, height) == (48, 32)
        assert str(photo.get_attribute("src")).startswith("blob:")
        page.screenshot(path=str(artifacts_dir() / "review-photo.png"), full_page=True)

        page.fill("#score", "7")
        page.fill("#reason", "the photo shows the working")
        page.click("#override")
        expect(page.locator("#outcome")).to_contain_text("the student sees 7")
    finally:
        page.close()
    # The page runs under its Content-Security-Policy: nothing of it was blocked.
    assert [e for e in errors if "Content Security Policy" in e] == []
    # The photo came from the review API, with the reviewer's own credential.
    [fetched] = files_fetched
    assert fetched["url"].endswith(f"/v1/reviews/{job_id}/files/0")
    assert fetched["status"] == 200
    assert fetched["authorization"] == f"Bearer {REVIEWER_KEY}"
    # Without the credential there is nothing to see.
    anonymous = requests.get(fetched["url"], timeout=10)
    assert anonymous.status_code == 401
