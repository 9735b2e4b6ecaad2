"""Lanes at the intake: the request picks one within what its client may use, the job keeps it."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from services.intake.app import create_app
from services.intake.openapi import openapi_document
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.errors import LaneNotAllowed, ValidationFailed
from shared.domain.events import GradingCompleted
from shared.domain.job import GradingRequest
from shared.domain.lanes import LanePolicy
from shared.service_layer.intake import IntakeService
from tests.unit.conftest import API_KEY, OTHER_KEY, PUSH_TOKEN
from tests.unit.test_intake_api import BODY, assert_problem, post, queue_of

LANES = ("exam", "grading", "bulk")


@pytest.fixture
def lane_settings(settings: Settings, tmp_path: Path) -> Settings:
    """client-a may use exam and grading (grading by default); everyone else grading, bulk."""
    return Settings(
        data_dir=tmp_path,
        push_token=PUSH_TOKEN,  # type: ignore[arg-type]
        grader_timeout_s=5,
        lease_s=1,
        heartbeat_s=0.3,
        client_lanes="client-a=grading|exam,*=bulk|grading",
    )


@pytest.fixture
def client(lane_settings: Settings, adapters: Adapters, clock: FrozenClock) -> FlaskClient:
    return create_app(lane_settings, adapters, clock).test_client()


def test_policy_gives_each_client_its_default_and_refuses_what_it_may_not_use() -> None:
    policy = LanePolicy.parse(LANES, "grading", "acme=exam|grading,*=bulk")
    assert policy.resolve("acme", None) == "exam"
    assert policy.resolve("acme", "grading") == "grading"
    assert policy.resolve("other", None) == "bulk"
    with pytest.raises(LaneNotAllowed) as refused:
        policy.resolve("other", "exam")
    assert refused.value.extensions == {"lane": "exam", "allowed": ["bulk"]}
    with pytest.raises(ValidationFailed):
        policy.resolve("acme", "express")


def test_without_a_client_list_every_client_may_use_every_lane() -> None:
    policy = LanePolicy.parse(LANES, "grading", "")
    assert policy.resolve("anyone", None) == "grading"
    assert policy.resolve("anyone", "exam") == "exam"


def test_a_client_list_naming_an_undeclared_lane_is_refused_at_start_up(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="undeclared"):
        Settings(data_dir=tmp_path, client_lanes="acme=express")
    with pytest.raises(ValueError, match="looks like"):
        Settings(data_dir=tmp_path, client_lanes="acme")


def test_the_requested_lane_is_stored_shown_and_its_queue_gets_the_task(
    client: FlaskClient, adapters: Adapters
) -> None:
    response = post(client, {**BODY, "lane": "exam"})
    assert response.status_code == 202, response.get_json()
    job = response.get_json()
    assert job["lane"] == "exam"
    stored = adapters.store.get(job["id"])
    assert stored is not None and stored.lane == "exam"
    assert [(t.job_id, t.queue) for t in queue_of(adapters).tasks] == [(job["id"], "exam")]
    assert client.get(response.headers["Location"], headers=_auth()).get_json()["lane"] == "exam"


def test_no_lane_means_the_clients_default_lane(client: FlaskClient, adapters: Adapters) -> None:
    mine = post(client, key="k-a").get_json()
    theirs = post(client, key="k-b", api_key=OTHER_KEY).get_json()
    assert (mine["lane"], theirs["lane"]) == ("grading", "bulk")
    assert [t.queue for t in queue_of(adapters).tasks] == ["grading", "bulk"]


def test_a_lane_the_client_may_not_use_is_a_403_problem_and_nothing_is_stored(
    client: FlaskClient, adapters: Adapters
) -> None:
    response = post(client, {**BODY, "lane": "exam"}, api_key=OTHER_KEY)
    problem = assert_problem(response, 403, "lane-not-allowed")
    assert problem["lane"] == "exam"
    assert problem["allowed"] == ["bulk", "grading"]
    assert queue_of(adapters).tasks == []


def test_an_unknown_lane_is_a_validation_problem(client: FlaskClient) -> None:
    assert_problem(post(client, {**BODY, "lane": "express"}), 400, "validation-error")
    malformed = post(client, {**BODY, "lane": "Not A Lane!"}, key="k-2")
    assert_problem(malformed, 400, "validation-error")


def test_the_completion_event_carries_the_lane(client: FlaskClient, adapters: Adapters) -> None:
    job_id = post(client, {**BODY, "lane": "exam"}).get_json()["id"]
    cancelled = client.post(f"/v1/grading-jobs/{job_id}/cancel", headers=_auth())
    assert cancelled.status_code == 200
    (event,) = adapters.publisher.events  # type: ignore[attr-defined]
    assert isinstance(event, GradingCompleted)
    assert event.lane == "exam"
    assert event.data()["lane"] == "exam"


def test_an_exam_job_is_not_spaced_behind_its_clients_backlog(
    adapters: Adapters, clock: FrozenClock
) -> None:
    queue = queue_of(adapters)
    policy = LanePolicy.parse(LANES, "grading", "", urgent_lanes=["exam"])
    intake = IntakeService(
        adapters.store,
        queue,
        adapters.publisher,
        clock,
        fair_spacing=timedelta(seconds=1),
        lanes=policy,
    )
    for i in range(5):
        intake.submit("acme", f"b{i}", GradingRequest(f"s{i}", "a", "r", lane="bulk"))
    intake.submit("acme", "e", GradingRequest("se", "a", "r", lane="exam"))
    due = {t.queue: t.schedule_time for t in queue.tasks}
    assert due["bulk"] == clock.now() + timedelta(seconds=4)  # the fifth, four spacings on
    assert due["exam"] == clock.now()  # not five spacings behind the bulk jobs


def _auth() -> dict[str, Any]:
    return {"Authorization": f"Bearer {API_KEY}"}


def test_openapi_documents_the_lane_and_its_403() -> None:
    document = openapi_document()
    refused = document["paths"]["/v1/grading-jobs"]["post"]["responses"]["403"]
    schema = refused["content"]["application/problem+json"]["schema"]["allOf"][1]
    assert "https://gradeq.dev/problems/lane-not-allowed" in schema["properties"]["type"]["enum"]
    schemas = document["components"]["schemas"]
    assert "lane" in schemas["GradingJobIn"]["properties"]
    assert "lane" in schemas["JobView"]["properties"]
