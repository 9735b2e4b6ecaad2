"""The local LTI 1.3 platform refuses what the specs make a platform refuse, and serves
the launch, AGS and NRPS shapes a tool relies on."""

from __future__ import annotations

import html
import re
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import jwt
import pytest
import requests

from localcloud.lti_platform import (
    INSTRUCTOR,
    LEARNER,
    LINEITEM_TYPE,
    LTI,
    SCOPE_LINEITEM,
    SCOPE_NRPS,
    SCOPE_RESULT_READ,
    SCOPE_SCORE,
    SCORE_TYPE,
    Member,
    PlatformState,
    ToolRegistration,
    running_platform,
)
from tests.support.lti_tool_keys import ToolKey, served_jwks

CLIENT = "gradeq-tool"
REDIRECT = "http://127.0.0.1:9/lti/launch"


class MovableClock:
    def __init__(self) -> None:
        self.at = time.time()

    def __call__(self) -> float:
        return self.at


@dataclass
class Setup:
    platform: PlatformState
    tool: ToolKey
    clock: MovableClock

    def token(self, *scopes: str) -> str:
        form = self.tool.grant_form(CLIENT, self.platform.token_url, " ".join(scopes))
        answer = requests.post(self.platform.token_url, data=form, timeout=5)
        assert answer.status_code == 200, answer.text
        return str(answer.json()["access_token"])


@pytest.fixture
def setup() -> Iterator[Setup]:
    clock = MovableClock()
    tool = ToolKey()
    with served_jwks(tool) as jwks_url, running_platform(PlatformState(now=clock)) as platform:
        platform.register_tool(
            ToolRegistration(CLIENT, "dep-1", "http://127.0.0.1:9/lti/login", (REDIRECT,), jwks_url)
        )
        platform.enrol("course-1", Member("t-1", (INSTRUCTOR,), "Tess"))
        platform.enrol("course-1", Member("u-1", (LEARNER,), "Ann", lis_person_sourcedid="s-1"))
        platform.enrol("course-1", Member("u-2", (LEARNER,), "Bo", lis_person_sourcedid="s-2"))
        yield Setup(platform, tool, clock)


def score(user: str = "u-1", **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "userId": user,
        "scoreGiven": 7,
        "scoreMaximum": 10,
        "comment": "good",
        "activityProgress": "Completed",
        "gradingProgress": "FullyGraded",
        "timestamp": "2026-03-01T12:00:00.000+00:00",
    }
    body.update(overrides)
    return body


def line_item(setup: Setup, token: str) -> str:
    made = requests.post(
        setup.platform.lineitems_url("course-1"),
        json={"label": "Essay 1", "scoreMaximum": 10, "resourceId": "a-1"},
        headers={"Authorization": f"Bearer {token}", "Content-Type": LINEITEM_TYPE},
        timeout=5,
    )
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


def post_score(url: str, token: str, body: object) -> requests.Response:
    return requests.post(
        url + "/scores",
        json=body,
        headers={"Authorization": f"Bearer {token}", "Content-Type": SCORE_TYPE},
        timeout=5,
    )


# --- the token endpoint --------------------------------------------------------------


def test_a_signed_assertion_buys_a_token_with_the_granted_scopes(setup: Setup) -> None:
    form = setup.tool.grant_form(CLIENT, setup.platform.token_url, f"{SCOPE_SCORE} other")
    answer = requests.post(setup.platform.token_url, data=form, timeout=5).json()
    assert answer["token_type"] == "Bearer"
    assert answer["expires_in"] == 3600
    assert answer["scope"] == SCOPE_SCORE


def test_an_assertion_for_another_audience_is_refused(setup: Setup) -> None:
    form = setup.tool.grant_form(CLIENT, setup.platform.issuer + "/elsewhere", SCOPE_SCORE)
    answer = requests.post(setup.platform.token_url, data=form, timeout=5)
    assert answer.status_code == 400
    assert answer.json()["error"] == "invalid_client"
    assert "aud" in answer.json()["error_description"]


def test_an_expired_assertion_is_refused(setup: Setup) -> None:
    form = setup.tool.grant_form(
        CLIENT, setup.platform.token_url, SCOPE_SCORE, exp=int(setup.clock.at) - 1
    )
    answer = requests.post(setup.platform.token_url, data=form, timeout=5)
    assert answer.status_code == 400
    assert "expired" in answer.json()["error_description"]


def test_an_assertion_from_the_future_is_refused(setup: Setup) -> None:
    form = setup.tool.grant_form(
        CLIENT, setup.platform.token_url, SCOPE_SCORE, iat=int(setup.clock.at) + 120
    )
    answer = requests.post(setup.platform.token_url, data=form, timeout=5)
    assert answer.status_code == 400
    assert "future" in answer.json()["error_description"]


def test_a_reused_assertion_is_refused(setup: Setup) -> None:
    form = setup.tool.grant_form(CLIENT, setup.platform.token_url, SCOPE_SCORE)
    assert requests.post(setup.platform.token_url, data=form, timeout=5).status_code == 200
    again = requests.post(setup.platform.token_url, data=form, timeout=5)
    assert again.status_code == 400
    assert "jti" in again.json()["error_description"]


def test_an_assertion_signed_by_another_key_is_refused(setup: Setup) -> None:
    stranger = ToolKey(kid=setup.tool.kid)
    form = stranger.grant_form(CLIENT, setup.platform.token_url, SCOPE_SCORE)
    answer = requests.post(setup.platform.token_url, data=form, timeout=5)
    assert answer.status_code == 400
    assert answer.json()["error"] == "invalid_client"


def test_no_allowed_scope_is_refused(setup: Setup) -> None:
    form = setup.tool.grant_form(CLIENT, setup.platform.token_url, "https://example.test/x")
    answer = requests.post(setup.platform.token_url, data=form, timeout=5)
    assert answer.status_code == 400
    assert answer.json()["error"] == "invalid_scope"


# --- services: tokens, scopes --------------------------------------------------------


def test_a_token_without_the_service_scope_is_forbidden(setup: Setup) -> None:
    item = line_item(setup, setup.token(SCOPE_LINEITEM))
    answer = post_score(item, setup.token(SCOPE_LINEITEM), score())
    assert answer.status_code == 403
    assert setup.platform.results(item) == {}


def test_an_expired_token_is_refused(setup: Setup) -> None:
    token = setup.token(SCOPE_LINEITEM, SCOPE_SCORE)
    item = line_item(setup, token)
    setup.clock.at += 3600
    assert post_score(item, token, score()).status_code == 401
    assert requests.get(item, timeout=5).status_code == 401


# --- scores --------------------------------------------------------------------------


def test_a_score_is_stored_and_read_back_as_a_result(setup: Setup) -> None:
    token = setup.token(SCOPE_LINEITEM, SCOPE_SCORE, SCOPE_RESULT_READ)
    item = line_item(setup, token)
    assert post_score(item, token, score()).status_code == 204
    results = requests.get(
        item + "/results", headers={"Authorization": f"Bearer {token}"}, timeout=5
    ).json()
    assert results == [
        {
            "id": f"{item}/results/u-1",
            "scoreOf": item,
            "userId": "u-1",
            "resultScore": 7,
            "resultMaximum": 10,
            "comment": "good",
        }
    ]


@pytest.mark.parametrize(
    "malformed",
    [
        score(scoreGiven="7"),
        score(scoreGiven=-1),
        score(scoreMaximum=0),
        {k: v for k, v in score().items() if k != "scoreMaximum"},
        score(gradingProgress="Done"),
        score(activityProgress=None),
        score(timestamp="2026-03-01 12:00"),
        score(timestamp="2026-03-01T12:00:00"),
        {k: v for k, v in score().items() if k != "userId"},
        score(comment=5),
        ["not", "an", "object"],
    ],
)
def test_a_malformed_score_is_refused(setup: Setup, malformed: object) -> None:
    token = setup.token(SCOPE_LINEITEM, SCOPE_SCORE)
    item = line_item(setup, token)
    assert post_score(item, token, malformed).status_code == 400
    assert setup.platform.results(item) == {}


def test_a_score_without_its_media_type_is_refused(setup: Setup) -> None:
    token = setup.token(SCOPE_LINEITEM, SCOPE_SCORE)
    item = line_item(setup, token)
    answer = requests.post(
        item + "/scores", json=score(), headers={"Authorization": f"Bearer {token}"}, timeout=5
    )
    assert answer.status_code == 415


def test_a_score_for_someone_outside_the_course_is_refused(setup: Setup) -> None:
    token = setup.token(SCOPE_LINEITEM, SCOPE_SCORE)
    item = line_item(setup, token)
    assert post_score(item, token, score("stranger")).status_code == 422


def test_an_older_timestamp_never_replaces_a_newer_result(setup: Setup) -> None:
    token = setup.token(SCOPE_LINEITEM, SCOPE_SCORE)
    item = line_item(setup, token)
    newer = score(scoreGiven=9, timestamp="2026-03-01T13:00:00.000+00:00")
    assert post_score(item, token, newer).status_code == 204
    assert post_score(item, token, score(scoreGiven=3)).status_code == 204
    assert setup.platform.results(item)["u-1"]["scoreGiven"] == 9


def test_a_pending_score_may_leave_the_score_out(setup: Setup) -> None:
    token = setup.token(SCOPE_LINEITEM, SCOPE_SCORE)
    item = line_item(setup, token)
    pending = {k: v for k, v in score(gradingProgress="PendingManual").items() if k != "scoreGiven"}
    assert post_score(item, token, pending).status_code == 204
    assert setup.platform.results(item)["u-1"]["gradingProgress"] == "PendingManual"


def test_a_line_item_needs_a_label_and_a_positive_maximum(setup: Setup) -> None:
    token = setup.token(SCOPE_LINEITEM)
    for body in ({"scoreMaximum": 10}, {"label": "x", "scoreMaximum": -1}):
        answer = requests.post(
            setup.platform.lineitems_url("course-1"),
            json=body,
            headers={"Authorization": f"Bearer {token}", "Content-Type": LINEITEM_TYPE},
            timeout=5,
        )
        assert answer.status_code == 400


def test_line_items_are_found_by_resource_id(setup: Setup) -> None:
    token = setup.token(SCOPE_LINEITEM)
    item = line_item(setup, token)
    headers = {"Authorization": f"Bearer {token}"}
    url = setup.platform.lineitems_url("course-1")
    found = requests.get(url, params={"resource_id": "a-1"}, headers=headers, timeout=5).json()
    assert [i["id"] for i in found] == [item]
    assert requests.get(url, params={"resource_id": "a-2"}, headers=headers, timeout=5).json() == []


# --- NRPS ----------------------------------------------------------------------------


def test_the_roster_pages_with_link_headers(setup: Setup) -> None:
    token = setup.token(SCOPE_NRPS)
    headers = {"Authorization": f"Bearer {token}"}
    first = requests.get(
        setup.platform.memberships_url("course-1"), params={"limit": 2}, headers=headers, timeout=5
    )
    following = re.match(r'<([^>]+)>; rel="next"', first.headers["Link"])
    assert following is not None
    second = requests.get(following.group(1), headers=headers, timeout=5)
    users = [m["user_id"] for m in first.json()["members"] + second.json()["members"]]
    assert users == ["t-1", "u-1", "u-2"]
    assert "Link" not in second.headers
    assert second.json()["members"][0]["lis_person_sourcedid"] == "s-2"


def test_the_roster_needs_its_scope(setup: Setup) -> None:
    token = setup.token(SCOPE_SCORE)
    answer = requests.get(
        setup.platform.memberships_url("course-1"),
        headers={"Authorization": f"Bearer {token}"},
        timeout=5,
    )
    assert answer.status_code == 403


# --- OIDC launch ---------------------------------------------------------------------


def auth_request(setup: Setup, nonce: str, **overrides: str) -> requests.Response:
    started = setup.platform.login_initiation(
        CLIENT, "u-1", "course-1", "rl-1", "http://127.0.0.1:9/lti/launch", {"a": "1"}
    )
    params = {
        "scope": "openid",
        "response_type": "id_token",
        "response_mode": "form_post",
        "prompt": "none",
        "client_id": CLIENT,
        "redirect_uri": REDIRECT,
        "login_hint": started["login_hint"],
        "lti_message_hint": started["lti_message_hint"],
        "state": "st-1",
        "nonce": nonce,
    }
    params.update(overrides)
    return requests.get(setup.platform.auth_url, params=params, timeout=5)


def posted_fields(page: str) -> dict[str, str]:
    return {
        name: html.unescape(value)
        for name, value in re.findall(r'name="([^"]+)" value="([^"]*)"', page)
    }


def test_the_auth_endpoint_posts_a_signed_id_token_to_the_tool(setup: Setup) -> None:
    nonce = secrets.token_hex(8)
    answer = auth_request(setup, nonce)
    assert answer.status_code == 200
    assert f'action="{REDIRECT}"' in answer.text
    fields = posted_fields(answer.text)
    assert fields["state"] == "st-1"
    keys = jwt.PyJWKClient(setup.platform.jwks_url)
    token = fields["id_token"]
    claims = jwt.decode(
        token, keys.get_signing_key_from_jwt(token).key, algorithms=["RS256"], audience=CLIENT
    )
    assert claims["nonce"] == nonce
    assert claims["sub"] == "u-1"
    assert claims[LTI + "roles"] == [LEARNER]
    assert claims[LTI + "deployment_id"] == "dep-1"
    assert claims[LTI + "custom"] == {"a": "1"}


def test_a_reused_nonce_is_refused(setup: Setup) -> None:
    assert auth_request(setup, "n-1").status_code == 200
    again = auth_request(setup, "n-1")
    assert again.status_code == 400
    assert "nonce" in again.json()["error_description"]


def test_an_unregistered_redirect_uri_is_refused(setup: Setup) -> None:
    answer = auth_request(setup, "n-2", redirect_uri="http://127.0.0.1:9/elsewhere")
    assert answer.status_code == 400
    assert "redirect_uri" in answer.json()["error_description"]


def test_an_unknown_client_is_refused(setup: Setup) -> None:
    answer = auth_request(setup, "n-3", client_id="someone")
    assert answer.json()["error"] == "unauthorized_client"
