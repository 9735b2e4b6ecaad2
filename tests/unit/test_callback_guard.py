"""The SSRF guard, called directly with an injected resolver: no test connects anywhere
except 127.0.0.1 (the guarded session's own test target)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests
from flask.testing import FlaskClient

from services.intake.app import create_app
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Backend, PushAuth, Settings
from shared.http.callback_guard import CallbackGuard, CallbackRefused, guarded_session
from tests.support.http_target import RecordingTarget
from tests.unit.test_intake_api import BODY, assert_problem, post, queue_of

DNS = {
    "hooks.example.com": ["93.184.216.34"],
    "rebind.example.com": ["127.0.0.1"],
    "inside.example.com": ["10.1.2.3"],
    "metadata.google.internal": ["169.254.169.254"],
    "mixed.example.com": ["93.184.216.34", "192.168.1.10"],
    "v6loop.example.com": ["::1"],
    "mapped.example.com": ["::ffff:127.0.0.1"],
}


def resolver(table: dict[str, list[str]]) -> Any:
    def resolve(host: str, port: int) -> list[str]:
        if host not in table:
            raise OSError(f"no such host {host}")
        return table[host]

    return resolve


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1/hook",
        "https://localhost.invalid/hook",  # does not resolve
        "https://10.0.0.5/hook",
        "https://169.254.169.254/computeMetadata/v1/",
        "https://metadata.google.internal/computeMetadata/v1/",
        "https://rebind.example.com/hook",
        "https://inside.example.com/hook",
        "https://mixed.example.com/hook",
        "https://[::1]/hook",
        "https://v6loop.example.com/hook",
        "https://mapped.example.com/hook",
        "https://[fd00:ec2::254]/hook",
        "https://0.0.0.0/hook",
        "https://100.64.0.1/hook",
    ],
)
def test_non_public_targets_are_refused(url: str) -> None:
    with pytest.raises(CallbackRefused):
        CallbackGuard(resolver(DNS)).check(url)


def test_a_public_name_is_allowed() -> None:
    assert CallbackGuard(resolver(DNS)).check("https://hooks.example.com/h") == ["93.184.216.34"]


def test_loopback_may_be_allowed_for_local_runs_but_private_never() -> None:
    guard = CallbackGuard(resolver(DNS), allow_loopback=True)
    assert guard.check("https://rebind.example.com/hook") == ["127.0.0.1"]
    with pytest.raises(CallbackRefused):
        guard.check("https://10.0.0.5/hook")
    with pytest.raises(CallbackRefused):
        guard.check("https://169.254.169.254/")


def test_the_loopback_setting_is_refused_on_google_cloud(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("FIRESTORE_EMULATOR_HOST", "PUBSUB_EMULATOR_HOST"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError, match="local runs only"):
        Settings(
            backend=Backend.GOOGLE,
            project_id="p",
            push_auth=PushAuth.OIDC,
            callback_allow_loopback=True,
        )


# --- the send-time guard: connects only to what it vetted when connecting -------------


@pytest.fixture
def target() -> Iterator[RecordingTarget]:
    with RecordingTarget() as recording:
        yield recording


def test_the_session_connects_to_the_vetted_address(target: RecordingTarget) -> None:
    # The name exists only in the injected resolver, so the OS resolver is never asked.
    guard = CallbackGuard(resolver({"hooks.test": ["127.0.0.1"]}), allow_loopback=True)
    port = target.url.rsplit(":", 1)[1]
    response = guarded_session(guard).post(f"http://hooks.test:{port}/hook", data=b"x", timeout=5)
    assert response.status_code == 200
    assert len(target.requests) == 1


def test_a_name_rebound_between_check_and_connect_is_refused(target: RecordingTarget) -> None:
    answers = iter([["93.184.216.34"], ["127.0.0.1"]])  # public at the check, then inside

    def rebinding(host: str, port: int) -> list[str]:
        return next(answers)

    guard = CallbackGuard(rebinding)
    port = target.url.rsplit(":", 1)[1]
    url = f"http://rebind.test:{port}/hook"
    guard.check(url)
    with pytest.raises(requests.ConnectionError) as caught:
        guarded_session(guard).post(url, data=b"x", timeout=5)
    assert "loopback" in str(caught.value)
    assert target.requests == []


# --- at submit -----------------------------------------------------------------------


@pytest.fixture
def client(settings: Settings, adapters: Adapters, clock: FrozenClock) -> FlaskClient:
    return create_app(settings, adapters, clock, CallbackGuard(resolver(DNS))).test_client()


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1/h",
        "https://10.1.1.1/h",
        "https://169.254.169.254/",
        "https://rebind.example.com/h",
    ],
)
def test_submit_refuses_internal_callbacks(
    client: FlaskClient, adapters: Adapters, url: str
) -> None:
    response = post(client, body={**BODY, "callback_url": url})
    assert_problem(response, 400, "callback-url-refused")
    assert queue_of(adapters).tasks == []


def test_submit_accepts_a_public_callback(client: FlaskClient) -> None:
    response = post(client, body={**BODY, "callback_url": "https://hooks.example.com/h"})
    assert response.status_code == 202
