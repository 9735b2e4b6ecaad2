"""Scheduled jobs: not_before becomes the task's schedule_time; a cancel before it wins."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from flask.testing import FlaskClient

from services.intake.app import create_app
from services.worker.app import create_app as create_worker
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from tests.fakes import ScriptedGrader
from tests.unit.conftest import API_KEY, PUSH_TOKEN
from tests.unit.test_intake_api import BODY, assert_problem, post, queue_of

AUTH = {"Authorization": f"Bearer {API_KEY}"}


def rfc3339(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


@pytest.fixture
def client(settings: Settings, adapters: Adapters, clock: FrozenClock) -> FlaskClient:
    return create_app(settings, adapters, clock).test_client()


def test_not_before_becomes_the_schedule_time_and_the_job_shows_it(
    client: FlaskClient, adapters: Adapters, clock: FrozenClock
) -> None:
    when = clock.now() + timedelta(days=2)
    offset = when.astimezone(datetime.now(UTC).astimezone().tzinfo).isoformat()
    response = post(client, body={**BODY, "not_before": offset})
    assert response.status_code == 202
    assert response.get_json()["not_before"] == rfc3339(when)
    [task] = queue_of(adapters).tasks
    assert task.schedule_time == when


def test_a_past_not_before_runs_now(
    client: FlaskClient, adapters: Adapters, clock: FrozenClock
) -> None:
    response = post(client, body={**BODY, "not_before": rfc3339(clock.now() - timedelta(hours=1))})
    assert response.status_code == 202
    assert queue_of(adapters).tasks[0].schedule_time == clock.now()


@pytest.mark.parametrize("value", ["2026-12-01T10:00:00", "tomorrow", 1767225600])
def test_not_before_must_be_rfc3339_with_an_offset(client: FlaskClient, value: object) -> None:
    problem = assert_problem(
        post(client, body={**BODY, "not_before": value}), 400, "validation-error"
    )
    assert {e["field"] for e in problem["errors"]} == {"not_before"}


def test_not_before_is_at_most_thirty_days_ahead(
    client: FlaskClient, adapters: Adapters, clock: FrozenClock
) -> None:
    too_far = rfc3339(clock.now() + timedelta(days=30, seconds=1))
    assert_problem(post(client, body={**BODY, "not_before": too_far}), 400, "validation-error")
    assert queue_of(adapters).tasks == []
    ok = rfc3339(clock.now() + timedelta(days=30))
    assert post(client, body={**BODY, "not_before": ok}, key="k-2").status_code == 202


def test_a_cancel_before_not_before_means_grading_never_starts(
    client: FlaskClient, adapters: Adapters, clock: FrozenClock, settings: Settings
) -> None:
    when = clock.now() + timedelta(hours=1)
    job = post(client, body={**BODY, "not_before": rfc3339(when)}).get_json()
    cancelled = client.post(f"/v1/grading-jobs/{job['id']}/cancel", headers=AUTH)
    assert cancelled.get_json()["status"] == "CANCELLED"
    # The task fires at its schedule_time; the worker finds the job final and drops it.
    clock.advance(timedelta(hours=1))
    grader = ScriptedGrader()
    worker = create_worker(settings, adapters, grader, clock).test_client()
    [task] = queue_of(adapters).tasks
    delivered = worker.post(
        "/tasks/grade",
        json={"job_id": task.job_id},
        headers={"Authorization": f"Bearer {PUSH_TOKEN}", "X-CloudTasks-TaskName": task.name},
    )
    assert 200 <= delivered.status_code < 300  # acknowledged, never retried
    assert grader.calls == 0
    final = client.get(f"/v1/grading-jobs/{job['id']}", headers=AUTH).get_json()
    assert final["status"] == "CANCELLED" and final["attempts"] == 0
