"""The operator's view of an assignment: any client's, with its progress and histogram."""

from __future__ import annotations

from flask.testing import FlaskClient

from shared.bootstrap import Adapters
from shared.domain.events import AssignmentGraded
from tests.fakes import FakePublisher
from tests.unit.conftest import API_KEY, OTHER_KEY
from tests.unit.test_admin_api import admin_settings, assert_problem, auth, client  # noqa: F401


def test_an_operator_sees_any_clients_assignment_and_a_client_key_is_refused(
    client: FlaskClient,  # noqa: F811
) -> None:
    body = {"title": "Essay", "rubric": "light", "max_score": 10}
    created = client.post(
        "/v1/assignments", json=body, headers={**auth(OTHER_KEY), "Idempotency-Key": "k"}
    )
    assignment_id = created.get_json()["id"]
    client.post(
        f"/v1/assignments/{assignment_id}/submissions:batch",
        json={"answers": [{"submission_id": "s", "answer": "light"}]},
        headers=auth(OTHER_KEY),
    )
    seen = client.get(f"/admin/v1/assignments/{assignment_id}", headers=auth())
    assert seen.status_code == 200, seen.get_json()
    view = seen.get_json()
    assert view["client_id"] == "client-b"
    assert view["progress"]["submissions"] == 1 and len(view["progress"]["histogram"]) == 11
    path = f"/admin/v1/assignments/{assignment_id}"
    assert_problem(client.get(path, headers=auth(API_KEY)), 403, "operator-credential-required")
    assert_problem(
        client.get("/admin/v1/assignments/nope", headers=auth()), 404, "assignment-not-found"
    )


def test_an_operator_cancelling_the_last_open_submission_announces_the_round(
    client: FlaskClient,  # noqa: F811
    adapters: Adapters,
) -> None:
    body = {"title": "Essay", "rubric": "light", "max_score": 10}
    created = client.post(
        "/v1/assignments", json=body, headers={**auth(API_KEY), "Idempotency-Key": "k"}
    )
    assignment_id = created.get_json()["id"]
    items = client.post(
        f"/v1/assignments/{assignment_id}/submissions:batch",
        json={"answers": [{"submission_id": "s", "answer": "light"}]},
        headers=auth(API_KEY),
    ).get_json()["items"]
    cancelled = client.post(f"/admin/v1/jobs/{items[0]['job_id']}/cancel", headers=auth())
    assert cancelled.status_code == 200, cancelled.get_json()
    publisher = adapters.publisher
    assert isinstance(publisher, FakePublisher)
    [event] = [e for e in publisher.events if isinstance(e, AssignmentGraded)]
    assert (event.assignment_id, event.submissions, event.cancelled) == (assignment_id, 1, 1)
