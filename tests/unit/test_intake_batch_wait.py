"""The request's `deadline` and the job view's `waiting` while it is in a provider batch."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import requests
from flask.testing import FlaskClient

from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from tests.unit.conftest import API_KEY
from tests.unit.test_cli import OPERATOR_KEY, gradeq, request_file, submitted, url
from tests.unit.test_intake_api import BODY, assert_problem, client, post

__all__ = ["client", "request_file", "url"]  # the fixtures, imported for these tests

AUTH = {"Authorization": f"Bearer {API_KEY}"}


def test_a_request_may_allow_hours(client: FlaskClient, adapters: Adapters) -> None:
    response = post(client, body={**BODY, "deadline": "hours"})
    assert response.status_code == 202
    job = adapters.store.get(response.get_json()["id"])
    assert job is not None and job.request.deadline == "hours"
    view = client.get(response.headers["Location"], headers=AUTH).get_json()
    assert view["deadline"] == "hours"
    assert "waiting" not in view  # not yet in a batch


def test_an_unknown_deadline_is_refused(client: FlaskClient, adapters: Adapters) -> None:
    problem = assert_problem(
        post(client, body={**BODY, "deadline": "days"}), 400, "validation-error"
    )
    assert {e["field"] for e in problem["errors"]} == {"deadline"}
    assert (
        adapters.store.count_by_status(10) == {}
        or sum(adapters.store.count_by_status(10).values()) == 0
    )


def test_the_view_shows_the_provider_batch_the_job_waits_in(
    client: FlaskClient, adapters: Adapters, clock: FrozenClock
) -> None:
    response = post(client, body={**BODY, "deadline": "hours"})
    job_id = response.get_json()["id"]
    now = clock.now()
    lease = timedelta(minutes=30)
    adapters.store.update(
        job_id,
        lambda j: (
            j.start_attempt("w", now, lease, 3)
            .enter_batch("w", "openai-compatible", now, lease)
            .submit_batch(None, "reserved/t", now, lease)
            .submit_batch("reserved/t", "batch_abc", now, lease)
        ),
    )
    view = client.get(response.headers["Location"], headers=AUTH).get_json()
    assert view["status"] == "RUNNING"
    assert view["waiting"] == {
        "kind": "provider-batch",
        "provider": "openai-compatible",
        "batch_id": "batch_abc",
        "since": now.isoformat().replace("+00:00", "Z"),
    }


def test_gradeq_status_and_the_admin_view_show_the_wait(
    url: str, request_file: Path, adapters: Adapters, clock: FrozenClock
) -> None:
    job_id = submitted(url, request_file, "batched")
    now = clock.now()
    lease = timedelta(minutes=30)
    adapters.store.update(
        job_id,
        lambda j: j.start_attempt("w", now, lease, 3).enter_batch("w", "gemini", now, lease),
    )
    shown = gradeq(url, "status", job_id)
    assert shown.exit_code == 0, shown.output
    assert "waiting" in shown.stdout and "gemini batch the next batch" in shown.stdout
    operator = {"Authorization": f"Bearer {OPERATOR_KEY}"}
    admin = requests.get(f"{url}/admin/v1/jobs/{job_id}", headers=operator, timeout=10)
    assert admin.status_code == 200
    assert admin.json()["waiting"] == {
        "kind": "provider-batch",
        "provider": "gemini",
        "batch_id": None,
        "since": now.isoformat().replace("+00:00", "Z"),
    }
