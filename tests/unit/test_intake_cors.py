"""CORS: preflights from the configured frontend origins pass; other origins get nothing."""

from __future__ import annotations

import pytest
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from services.intake.app import create_app
from services.intake.auth.cors import ALLOWED_METHODS, PREFLIGHT_MAX_AGE_S
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from tests.unit.test_intake_api import post

FRONTEND = "https://app.example.com"


@pytest.fixture
def client(settings: Settings, adapters: Adapters, clock: FrozenClock) -> FlaskClient:
    tuned = settings.model_copy(update={"cors_origins": f"{FRONTEND}, https://admin.example.com"})
    return create_app(tuned, adapters, clock).test_client()


def preflight(
    client: FlaskClient,
    origin: str,
    method: str = "POST",
    path: str = "/v1/grading-jobs",
    requested: str = "authorization, content-type, idempotency-key",
) -> TestResponse:
    return client.options(
        path,
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": method,
            "Access-Control-Request-Headers": requested,
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
    assert headers["Access-Control-Max-Age"] == str(PREFLIGHT_MAX_AGE_S)  # cached that long
    assert "Origin" in headers["Vary"]


def test_a_preflight_is_allowed_only_the_headers_the_api_reads(client: FlaskClient) -> None:
    response = preflight(client, FRONTEND, requested="authorization, x-debug-token")
    allowed = {
        h.strip().lower() for h in response.headers["Access-Control-Allow-Headers"].split(",")
    }
    assert allowed == {"authorization"}


def test_a_preflight_from_another_origin_gets_no_cors_headers(client: FlaskClient) -> None:
    response = preflight(client, "https://evil.example.net")
    headers = response.headers
    assert "Access-Control-Allow-Origin" not in headers
    assert "Access-Control-Allow-Headers" not in headers


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("DELETE", "/v1/grading-jobs/job-1"),
        ("DELETE", "/v1/students/ada"),
        ("PATCH", "/v1/assignments/a-1"),
        ("PUT", "/v1/blobs/uploads/x/up_1"),
        ("GET", "/v1/reviews"),
    ],
)
def test_every_method_the_api_serves_is_allowed_from_an_allowed_origin_only(
    client: FlaskClient, method: str, path: str
) -> None:
    response = preflight(client, FRONTEND, method, path)
    assert response.headers["Access-Control-Allow-Origin"] == FRONTEND
    allowed = {m.strip() for m in response.headers["Access-Control-Allow-Methods"].split(",")}
    assert allowed == set(ALLOWED_METHODS)  # those the API serves, and no other
    elsewhere = preflight(client, "https://evil.example.net", method, path)
    assert "Access-Control-Allow-Origin" not in elsewhere.headers
    assert "Access-Control-Allow-Methods" not in elsewhere.headers


@pytest.mark.parametrize("path", ["/admin/v1/jobs", "/healthz"])
def test_routes_outside_the_api_answer_no_browser_even_from_an_allowed_origin(
    client: FlaskClient, path: str
) -> None:
    response = preflight(client, FRONTEND, "GET", path)
    assert "Access-Control-Allow-Origin" not in response.headers


def test_the_api_description_is_readable_from_an_allowed_origin(client: FlaskClient) -> None:
    response = preflight(client, FRONTEND, "GET", "/openapi.json")
    assert response.headers["Access-Control-Allow-Origin"] == FRONTEND


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


def test_the_allowed_methods_cover_every_route_under_v1(client: FlaskClient) -> None:
    app = client.application
    served = {
        method
        for rule in app.url_map.iter_rules()
        if rule.rule.startswith("/v1/")
        for method in rule.methods or ()
    } - {"HEAD", "OPTIONS"}
    assert {"GET", "POST", "PATCH", "DELETE"} <= served
    response = preflight(client, FRONTEND, "DELETE")
    allowed = {m.strip() for m in response.headers["Access-Control-Allow-Methods"].split(",")}
    assert served <= allowed
