"""CORS: preflights from the configured frontend origins pass; other origins get nothing."""

from __future__ import annotations

import pytest
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from services.intake.app import create_app
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from tests.unit.test_intake_api import post

FRONTEND = "https://app.example.com"


@pytest.fixture
def client(settings: Settings, adapters: Adapters, clock: FrozenClock) -> FlaskClient:
    tuned = settings.model_copy(update={"cors_origins": f"{FRONTEND}, https://admin.example.com"})
    return create_app(tuned, adapters, clock).test_client()


def preflight(client: FlaskClient, origin: str) -> TestResponse:
    return client.options(
        "/v1/grading-jobs",
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type, idempotency-key",
        },
    )


def test_a_preflight_from_an_allowed_origin_is_answered(client: FlaskClient) -> None:
    response = preflight(client, FRONTEND)
    assert response.status_code == 200
    headers = response.headers
    assert headers["Access-Control-Allow-Origin"] == FRONTEND
    allowed = {h.strip().lower() for h in headers["Access-Control-Allow-Headers"].split(",")}
    assert {"authorization", "content-type", "idempotency-key"} <= allowed
    assert "POST" in headers["Access-Control-Allow-Methods"]
    assert "Access-Control-Allow-Credentials" not in headers
    assert "Origin" in headers["Vary"]


def test_a_preflight_from_another_origin_gets_no_cors_headers(client: FlaskClient) -> None:
    response = preflight(client, "https://evil.example.net")
    headers = response.headers
    assert "Access-Control-Allow-Origin" not in headers
    assert "Access-Control-Allow-Headers" not in headers


def test_an_allowed_origin_can_read_the_location_and_retry_after(client: FlaskClient) -> None:
    response = post(client, headers={"Origin": FRONTEND})
    assert response.status_code == 202
    assert response.headers["Access-Control-Allow-Origin"] == FRONTEND
    exposed = response.headers["Access-Control-Expose-Headers"]
    assert "Location" in exposed and "Retry-After" in exposed and "RateLimit-Remaining" in exposed


def test_without_configured_origins_nothing_is_allowed(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    plain = create_app(settings, adapters, clock).test_client()
    assert "Access-Control-Allow-Origin" not in preflight(plain, FRONTEND).headers


@pytest.mark.parametrize("origins", ["*", "app.example.com"])
def test_wildcards_and_bare_hosts_are_refused(origins: str) -> None:
    with pytest.raises(ValueError, match="exact origins"):
        Settings(cors_origins=origins).cors_origin_list()
