"""Internal error text stays in the logs: clients and the readiness probe get generic words."""

from __future__ import annotations

import logging

import pytest
from flask.testing import FlaskClient

from services.intake.app import create_app
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.errors import DependencyUnavailable
from shared.ports import TaskSpec
from tests.fakes import FakeTaskQueue
from tests.unit.test_intake_api import assert_problem, post

#: What an adapter's error carries: the backend's own words, an address, a project path.
CAUSE = "Cloud Tasks create_task failed: 503 ipv4:10.20.30.40:443 projects/acme-prod/queues/q"


class DownQueue(FakeTaskQueue):
    def enqueue(self, task: TaskSpec) -> bool:
        raise DependencyUnavailable(CAUSE)

    def ping(self) -> None:
        raise DependencyUnavailable(CAUSE)


@pytest.fixture
def client(settings: Settings, adapters: Adapters, clock: FrozenClock) -> FlaskClient:
    down = Adapters(adapters.store, DownQueue(), adapters.publisher, adapters.uow)
    return create_app(settings, down, clock).test_client()


def test_a_503_problem_carries_no_internal_text(
    client: FlaskClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR):
        response = post(client)
    problem = assert_problem(response, 503, "dependency-unavailable")
    body = response.get_data(as_text=True)
    for leaked in ("10.20.30.40", "acme-prod", "Cloud Tasks", "create_task"):
        assert leaked not in body
    assert problem["detail"]
    assert CAUSE in caplog.text  # the operator still sees the cause


@pytest.mark.parametrize("path", ["/readyz", "/health/ready"])
def test_readiness_names_the_failing_check_but_not_its_cause(
    client: FlaskClient, caplog: pytest.LogCaptureFixture, path: str
) -> None:
    with caplog.at_level(logging.WARNING):
        response = client.get(path)
    assert response.status_code == 503
    assert response.get_json() == {
        "status": "unavailable",
        "checks": {"store": "ok", "queue": "unavailable"},
    }
    assert CAUSE in caplog.text
