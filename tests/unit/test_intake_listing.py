"""GET /v1/grading-jobs: a client's own jobs, filtered, a page at a time."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from flask.testing import FlaskClient

from services.intake.app import create_app
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from tests.unit.conftest import API_KEY, OTHER_KEY
from tests.unit.test_intake_api import BODY, assert_problem, post

AUTH = {"Authorization": f"Bearer {API_KEY}"}


@pytest.fixture
def client(settings: Settings, adapters: Adapters, clock: FrozenClock) -> FlaskClient:
    return create_app(settings, adapters, clock).test_client()


def submit(client: FlaskClient, clock: FrozenClock, n: int, **body: Any) -> list[str]:
    made = []
    for i in range(n):
        clock.advance(timedelta(seconds=1))
        response = post(
            client, body={**BODY, **body}, key=f"{body.get('submission_id', 'job')}-{i}"
        )
        made.append(response.get_json()["id"])
    return made


def test_pages_walk_every_job_of_the_client_once_newest_first(
    client: FlaskClient, clock: FrozenClock
) -> None:
    mine = submit(client, clock, 5)
    post(client, key="theirs", api_key=OTHER_KEY)
    seen: list[str] = []
    url = "/v1/grading-jobs?limit=2"
    while True:
        page = client.get(url, headers=AUTH).get_json()
        assert len(page["jobs"]) <= 2
        seen.extend(j["id"] for j in page["jobs"])
        if page["next_cursor"] is None:
            break
        url = f"/v1/grading-jobs?limit=2&cursor={page['next_cursor']}"
    assert seen == list(reversed(mine))


def test_filters_by_status_and_submission_id(client: FlaskClient, clock: FrozenClock) -> None:
    first = submit(client, clock, 2, submission_id="essay-1")
    submit(client, clock, 1, submission_id="essay-2")
    client.post(f"/v1/grading-jobs/{first[0]}/cancel", headers=AUTH)
    by_submission = client.get("/v1/grading-jobs?submission_id=essay-1", headers=AUTH).get_json()
    assert [j["id"] for j in by_submission["jobs"]] == [first[1], first[0]]
    cancelled = client.get("/v1/grading-jobs?status=CANCELLED", headers=AUTH).get_json()
    assert [j["id"] for j in cancelled["jobs"]] == [first[0]]
    assert cancelled["next_cursor"] is None


@pytest.mark.parametrize(
    "query", ["status=DONE", "limit=0", "limit=101", "cursor=not-a-cursor", "surprise=1"]
)
def test_bad_parameters_are_400(client: FlaskClient, query: str) -> None:
    assert_problem(client.get(f"/v1/grading-jobs?{query}", headers=AUTH), 400, "validation-error")


def test_listing_needs_a_credential(client: FlaskClient) -> None:
    assert_problem(client.get("/v1/grading-jobs"), 401, "unauthenticated")
