"""An LTI 1.3 launch from the local platform signs a teacher in to the assignment's review
page and a student to their grade, with the policy's roles; every check of LTI 1.3 Core's
launch validation refuses what it must (state, cookie, nonce, signature, aud, expiry,
deployment, roles)."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from flask import Flask
from flask.testing import FlaskClient
from pydantic import SecretStr

from localcloud.lti_platform import (
    INSTRUCTOR,
    LEARNER,
    Member,
    PlatformState,
    ToolRegistration,
    running_platform,
)
from services.intake.app import create_app
from services.notification.sealing import new_sealing_key
from shared.bootstrap import Adapters, adapter_family
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.lti import AssignmentLink, LtiRegistration
from shared.ports import LtiStore
from shared.service_layer.lti_launch import state_cookie

TOOL = "http://localhost"
CLIENT = "gradeq-client"
MENTOR = "http://purl.imsglobal.org/vocab/lis/v2/membership#Mentor"


@dataclass
class Rig:
    platform: PlatformState
    app: Flask
    clock: FrozenClock
    store: LtiStore

    def browser(self) -> FlaskClient:
        return self.app.test_client()

    def start(
        self,
        browser: FlaskClient,
        user: str,
        custom: dict[str, str] | None = None,
        target: str = TOOL + "/lti/launch",
    ) -> dict[str, str]:
        """Login initiation through the platform's form post: what reaches /lti/launch."""
        params = self.platform.login_initiation(
            CLIENT,
            user,
            "course-1",
            "rl-1",
            target,
            {"assignment_id": "a-1"} if custom is None else custom,
        )
        login = browser.post("/lti/login", data=params)
        assert login.status_code == 302, login.get_data(as_text=True)
        page = requests.get(login.headers["Location"], timeout=5)
        assert page.status_code == 200, page.text
        return posted(page.text)


def posted(page: str) -> dict[str, str]:
    """The fields of the platform's auto-submitting form."""
    return {
        name: html.unescape(value)
        for name, value in re.findall(r'name="([^"]+)" value="([^"]*)"', page)
    }


@pytest.fixture
def rig(settings: Settings, adapters: Adapters) -> Iterator[Rig]:
    clock = FrozenClock(datetime.now(UTC))
    configured = settings.model_copy(
        update={"lti_tool_url": TOOL, "lti_secrets_key": SecretStr(new_sealing_key())}
    )
    family = adapter_family(configured)
    with running_platform() as platform:
        platform.register_tool(
            ToolRegistration(
                CLIENT, "dep-1", TOOL + "/lti/login", (TOOL + "/lti/launch",), TOOL + "/jwks"
            )
        )
        platform.register_tool(
            ToolRegistration(
                "other-tool", "dep-1", TOOL + "/lti/login", (TOOL + "/lti/launch",), TOOL
            )
        )
        platform.enrol("course-1", Member("t-1", (INSTRUCTOR,), "Tess"))
        platform.enrol("course-1", Member("u-1", (LEARNER,), "Ann", lis_person_sourcedid="s-1"))
        platform.enrol("course-1", Member("m-1", (MENTOR,), "Max"))
        family.lti_store().put_registration(
            LtiRegistration(
                "client-a",
                platform.issuer,
                CLIENT,
                ("dep-1",),
                platform.auth_url,
                platform.token_url,
                platform.jwks_url,
            )
        )
        app = create_app(configured, adapters, clock, family=family)
        yield Rig(platform, app, clock, family.lti_store())


def launched(answer: Any) -> tuple[str, dict[str, list[str]], str]:
    assert answer.status_code == 303, answer.get_data(as_text=True)
    target = urlsplit(answer.headers["Location"])
    assert target.fragment.startswith("lti_session=")
    return target.path, parse_qs(target.query), target.fragment.removeprefix("lti_session=")


def refusal(answer: Any) -> str:
    assert answer.status_code == 400, answer.get_data(as_text=True)
    body = answer.get_json()
    assert body["type"].endswith("/lti-launch-refused")
    return str(body["detail"])


def test_a_teacher_lands_on_the_review_page_signed_in_as_staff(rig: Rig) -> None:
    browser = rig.browser()
    form = rig.start(browser, "t-1")
    path, query, session = launched(browser.post("/lti/launch", data=form))
    assert (path, query) == ("/review/", {"assignment_id": ["a-1"]})
    reviews = rig.browser().get(
        "/v1/reviews",
        query_string={"assignment_id": "a-1"},
        headers={"Authorization": f"Bearer {session}"},
    )
    assert reviews.status_code == 200, reviews.get_data(as_text=True)


def test_a_student_lands_on_their_grade_as_a_student(rig: Rig) -> None:
    browser = rig.browser()
    form = rig.start(browser, "u-1")
    path, query, session = launched(browser.post("/lti/launch", data=form))
    assert (path, query) == ("/lti/grade/", {"assignment_id": ["a-1"]})
    principal = rig.app.extensions["gradeq.lti_launches"].principal_for(session)
    assert (principal.school, principal.author, principal.role.value) == (
        "client-a",
        "s-1",
        "student",
    )
    reviews = rig.browser().get("/v1/reviews", headers={"Authorization": f"Bearer {session}"})
    assert reviews.status_code == 403


def test_a_launch_tells_where_the_assignments_grades_go(rig: Rig) -> None:
    browser = rig.browser()
    launched(browser.post("/lti/launch", data=rig.start(browser, "t-1")))
    link = rig.store.link("client-a", "a-1")
    assert link == AssignmentLink(
        "client-a",
        "a-1",
        rig.platform.issuer,
        CLIENT,
        "course-1",
        rig.platform.lineitems_url("course-1"),
        rig.platform.memberships_url("course-1"),
    )


def test_a_session_expires(rig: Rig) -> None:
    browser = rig.browser()
    _, _, session = launched(browser.post("/lti/launch", data=rig.start(browser, "t-1")))
    rig.clock.advance(timedelta(hours=1))
    answer = rig.browser().get("/v1/reviews", headers={"Authorization": f"Bearer {session}"})
    assert answer.status_code == 401


def test_a_replayed_launch_is_refused(rig: Rig) -> None:
    browser = rig.browser()
    form = rig.start(browser, "t-1")
    launched(browser.post("/lti/launch", data=form))
    browser.set_cookie(
        "gradeq_lti_state",
        state_cookie(form["state"]),
        path="/lti",
    )
    assert "nonce" in refusal(browser.post("/lti/launch", data=form))


def test_a_launch_without_the_browsers_state_cookie_is_refused(rig: Rig) -> None:
    form = rig.start(rig.browser(), "t-1")
    assert "browser" in refusal(rig.browser().post("/lti/launch", data=form))


def test_a_state_gradeq_did_not_sign_is_refused(rig: Rig) -> None:
    browser = rig.browser()
    form = rig.start(browser, "t-1")
    head, body, _ = form["state"].split(".")
    forged = f"{head}.{body}.{'A' * 43}"
    browser.set_cookie("gradeq_lti_state", state_cookie(forged), path="/lti")
    assert "state" in refusal(browser.post("/lti/launch", data={**form, "state": forged}))


def test_an_id_token_for_another_client_is_refused(rig: Rig) -> None:
    browser = rig.browser()
    form = rig.start(browser, "t-1")
    started = rig.platform.login_initiation(
        "other-tool", "t-1", "course-1", "rl-1", TOOL + "/lti/launch", {"assignment_id": "a-1"}
    )
    page = requests.get(
        rig.platform.auth_url,
        params={
            "scope": "openid",
            "response_type": "id_token",
            "response_mode": "form_post",
            "prompt": "none",
            "client_id": "other-tool",
            "redirect_uri": TOOL + "/lti/launch",
            "login_hint": "t-1",
            "lti_message_hint": started["lti_message_hint"],
            "state": "s",
            "nonce": "n-other",
        },
        timeout=5,
    )
    other = posted(page.text)
    detail = refusal(browser.post("/lti/launch", data={**form, "id_token": other["id_token"]}))
    assert "audience" in detail.lower()


def test_a_tampered_id_token_is_refused(rig: Rig) -> None:
    browser = rig.browser()
    form = rig.start(browser, "t-1")
    head, body, signature = form["id_token"].split(".")
    tampered = f"{head}.{body}.{signature[::-1]}"
    assert "id_token" in refusal(browser.post("/lti/launch", data={**form, "id_token": tampered}))


def test_an_expired_id_token_is_refused(rig: Rig) -> None:
    browser = rig.browser()
    form = rig.start(browser, "t-1")
    rig.clock.advance(timedelta(minutes=6))
    assert "expired" in refusal(browser.post("/lti/launch", data=form))


def test_an_unregistered_deployment_is_refused(rig: Rig) -> None:
    rig.platform.tools[CLIENT].deployment_id = "dep-unknown"
    browser = rig.browser()
    params = rig.platform.login_initiation(CLIENT, "t-1", "course-1", "rl-1", TOOL + "/lti/launch")
    assert "deployment" in refusal(browser.post("/lti/login", data=params))


def test_a_role_gradeq_does_not_serve_is_forbidden(rig: Rig) -> None:
    browser = rig.browser()
    answer = browser.post("/lti/launch", data=rig.start(browser, "m-1"))
    assert answer.status_code == 403
    assert answer.get_json()["type"].endswith("/forbidden")


def test_a_link_may_name_its_assignment_in_its_url(rig: Rig) -> None:
    browser = rig.browser()
    form = rig.start(browser, "t-1", custom={}, target=TOOL + "/lti/launch?assignment_id=a-7")
    path, query, _ = launched(browser.post("/lti/launch", data=form))
    assert (path, query) == ("/review/", {"assignment_id": ["a-7"]})


def test_a_link_without_an_assignment_is_refused(rig: Rig) -> None:
    browser = rig.browser()
    form = rig.start(browser, "t-1", custom={})
    assert "assignment_id" in refusal(browser.post("/lti/launch", data=form))


def test_a_login_for_an_unknown_platform_or_a_foreign_target_is_refused(rig: Rig) -> None:
    params = rig.platform.login_initiation(CLIENT, "t-1", "course-1", "rl-1", TOOL + "/lti/launch")
    browser = rig.browser()
    assert "registration" in refusal(
        browser.post("/lti/login", data={**params, "iss": "https://lms.other.test"})
    )
    assert "target_link_uri" in refusal(
        browser.post("/lti/login", data={**params, "target_link_uri": "https://evil.test/x"})
    )


def test_the_jwks_lists_gradeqs_public_key_only(rig: Rig) -> None:
    answer = rig.browser().get("/lti/jwks.json")
    [key] = answer.get_json()["keys"]
    assert key["alg"] == "RS256" and "d" not in key
    assert "max-age" in answer.headers["Cache-Control"]


def test_the_routes_are_absent_where_lti_is_not_configured(
    settings: Settings, adapters: Adapters
) -> None:
    app = create_app(settings, adapters, FrozenClock())
    assert app.test_client().get("/lti/jwks.json").status_code == 404
    assert "lti" not in app.blueprints


def test_both_landing_pages_are_served_under_the_page_policies(rig: Rig) -> None:
    browser = rig.browser()
    for page in ("/review/", "/lti/grade/", "/lti/grade/static/grade.js"):
        with browser.get(page) as answer:
            assert answer.status_code == 200, page
            assert "frame-ancestors 'none'" in answer.headers["Content-Security-Policy"]
            text = answer.get_data(as_text=True)
    assert "lti_session" in text and "history.replaceState" in text
