"""The review page in headless Chromium on a student's regrade request: the request shows
beside the answer, and the page's override answers it (a change, with the reviewer's
reason) through the request's own API, not the queue's accept/override."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import requests
from pydantic import SecretStr
from werkzeug.serving import make_server

from services.intake.app import create_app
from services.intake.auth.firebase import CachingRequest, FirebaseAuthenticator
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.assignment import Assignment
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest, Job
from tests.e2e.browser import artifacts_dir
from tests.unit.conftest import adapters, clock, settings  # noqa: F401 (fixtures)
from tests.unit.test_intake_firebase_auth import (
    PROJECT,
    SESSION_LIFETIME_S,
    FakeCertEndpoint,
    token,
)

pytestmark = pytest.mark.e2e

REVIEWER_KEY = "e2e-request-reviewer-key"
STUDENT = {
    "Authorization": f"Bearer {token(SESSION_LIFETIME_S, gradeq_client='client-a', sub='ada')}"
}


@pytest.fixture
def url(
    settings: Settings,  # noqa: F811
    adapters: Adapters,  # noqa: F811
    clock: FrozenClock,  # noqa: F811
) -> Iterator[str]:
    """The intake on a loopback port: reviewer keys and students' ID tokens."""
    reviewers = settings.model_copy(
        update={"reviewer_keys": SecretStr(f"client-a/ms={REVIEWER_KEY}")}
    )
    firebase = FirebaseAuthenticator(
        PROJECT, "gradeq_client", {}, CachingRequest(FakeCertEndpoint())
    )
    server = make_server(
        "127.0.0.1", 0, create_app(reviewers, adapters, clock, firebase=firebase), threaded=True
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join()


def _graded(adapters: Adapters, clock: FrozenClock) -> str:  # noqa: F811
    """Ada's graded answer to an assignment that takes regrade requests for a day."""
    now = clock.now()
    assert adapters.assignments is not None
    until = (now + timedelta(days=1)).isoformat()
    requests_until = {"regrade_requests_until": until}
    assignment = Assignment.new(
        "a-1", "client-a", "t", "light", 10.0, "grading-v1", now, requests_until
    )
    adapters.assignments.create(assignment)
    request = GradingRequest("s1", "Chlorophyll absorbs light.", "light", 10, assignment_id="a-1")
    job = Job.new("job-1", "client-a", request, "fp", now, author="ada")
    job = job.claim("w", now, timedelta(seconds=30)).succeed("w", GradeResult(4, 10, "ok"), now)
    adapters.store.create(job)
    return job.id


def test_the_reviewer_answers_a_regrade_request_on_the_page(
    url: str,
    adapters: Adapters,  # noqa: F811
    clock: FrozenClock,  # noqa: F811
    browser: Any,
) -> None:
    from playwright.sync_api import expect

    job_id = _graded(adapters, clock)
    asked = requests.post(
        f"{url}/v1/grading-jobs/{job_id}/regrade-request",
        json={"reason": "the second line names chlorophyll"},
        headers=STUDENT,
        timeout=10,
    )
    assert asked.status_code == 201, asked.text
    page = browser.new_page(viewport={"width": 1200, "height": 1000})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        page.goto(url + "/review/")
        page.fill("#key", REVIEWER_KEY)
        page.click("#login button[type=submit]")
        row = page.locator(f'#queue tr[data-job-id="{job_id}"]')
        expect(row).to_contain_text("regrade-request")
        row.click()
        expect(page.locator("#request")).to_have_text(
            "The student asks for a regrade: the second line names chlorophyll"
        )
        page.fill("#score", "6")
        page.fill("#reason", "chlorophyll is named")
        page.click("#override")
        expect(page.locator("#outcome")).to_contain_text("the student sees 6")
        expect(row).to_have_count(0)
        page.screenshot(path=str(artifacts_dir() / "review-request.png"), full_page=True)
    finally:
        page.close()
    assert [e for e in errors if "Content Security Policy" in e] == []
    mine = requests.get(f"{url}/v1/grading-jobs/{job_id}", headers=STUDENT, timeout=10).json()
    assert mine["result"]["score"] == 6
    assert mine["regrade_request"]["answer"] == "change"
    assert mine["regrade_request"]["answer_reason"] == "chlorophyll is named"
