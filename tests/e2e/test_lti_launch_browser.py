"""An LTI 1.3 launch in headless Chromium, from the local platform to Gradeq's pages: login
initiation, the platform's auto-submitting form, the launch (the state cookie travels with
the browser), then the teacher's review page and the student's grade page signed in with
the session from the URL fragment, which leaves the address bar."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from pydantic import SecretStr
from werkzeug.serving import make_server

from localcloud.lti_platform import (
    INSTRUCTOR,
    LEARNER,
    Member,
    PlatformState,
    ToolRegistration,
    running_platform,
)
from localcloud.stack import free_port
from services.intake.app import create_app
from services.notification.sealing import new_sealing_key
from shared.bootstrap import adapter_family
from shared.config.settings import Settings
from shared.domain.lti import LtiRegistration
from tests.e2e.browser import artifacts_dir

pytestmark = pytest.mark.e2e

CLIENT = "gradeq-client"


@dataclass
class Setup:
    platform: PlatformState
    tool_url: str

    def login_url(self, user: str) -> str:
        params = self.platform.login_initiation(
            CLIENT,
            user,
            "course-1",
            "rl-1",
            self.tool_url + "/lti/launch",
            {"assignment_id": "a-1"},
        )
        return f"{self.tool_url}/lti/login?{urlencode(params)}"


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    port = free_port()
    tool_url = f"http://127.0.0.1:{port}"
    settings = Settings(
        data_dir=tmp_path,
        lti_tool_url=tool_url,
        lti_secrets_key=SecretStr(new_sealing_key()),
    )
    family = adapter_family(settings)
    server = make_server("127.0.0.1", port, create_app(settings, family=family), threaded=True)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        with running_platform() as platform:
            platform.register_tool(
                ToolRegistration(
                    CLIENT,
                    "dep-1",
                    tool_url + "/lti/login",
                    (tool_url + "/lti/launch",),
                    tool_url + "/lti/jwks.json",
                )
            )
            platform.enrol("course-1", Member("t-1", (INSTRUCTOR,), "Tess"))
            platform.enrol("course-1", Member("u-1", (LEARNER,), "Ann", lis_person_sourcedid="s-1"))
            family.lti_store().put_registration(
                LtiRegistration(
                    "school",
                    platform.issuer,
                    CLIENT,
                    ("dep-1",),
                    platform.auth_url,
                    platform.token_url,
                    platform.jwks_url,
                )
            )
            yield Setup(platform, tool_url)
    finally:
        server.shutdown()
        thread.join(timeout=5)


def test_a_teacher_lands_signed_in_on_the_assignments_review_queue(
    setup: Setup, browser: Any
) -> None:
    from playwright.sync_api import expect

    page = browser.new_page()
    try:
        page.goto(setup.login_url("t-1"))
        expect(page.locator("#board")).to_be_visible(timeout=15_000)
        expect(page.locator("#login")).to_be_hidden()
        assert page.url == f"{setup.tool_url}/review/?assignment_id=a-1"  # the session left
        assert page.locator("#agreement-assignment").input_value() == "a-1"
        assert page.locator("#message").text_content() == ""
    finally:
        page.screenshot(path=str(artifacts_dir() / "lti-teacher.png"))
        page.close()


def test_a_student_lands_on_their_grade(setup: Setup, browser: Any) -> None:
    from playwright.sync_api import expect

    page = browser.new_page()
    try:
        page.goto(setup.login_url("u-1"))
        expect(page.locator("#message")).to_have_text("No grade yet.", timeout=15_000)
        assert page.url == f"{setup.tool_url}/lti/grade/?assignment_id=a-1"
    finally:
        page.screenshot(path=str(artifacts_dir() / "lti-student.png"))
        page.close()


def test_a_launch_replayed_in_another_browser_is_refused(setup: Setup, browser: Any) -> None:
    first = browser.new_context()
    page = first.new_page()
    posted: dict[str, str] = {}

    def keep(request: Any) -> None:
        if request.url.endswith("/lti/launch") and request.method == "POST":
            posted["body"] = request.post_data or ""

    page.on("request", keep)
    page.goto(setup.login_url("t-1"))
    page.wait_for_url("**/review/**", timeout=15_000)
    first.close()
    other = browser.new_context()
    try:
        answer = other.request.post(
            setup.tool_url + "/lti/launch",
            data=posted["body"],
            headers={"Content-Type": "application/x-www-form-urlencoded"},
            max_redirects=0,
        )
        assert answer.status == 400
        assert answer.json()["type"].endswith("/lti-launch-refused")
    finally:
        other.close()
