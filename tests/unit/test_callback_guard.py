"""The SSRF guard, called directly with an injected resolver: no test connects anywhere
except 127.0.0.1 (the guarded session's own test target)."""

from __future__ import annotations

import logging
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

    port = target.url.rsplit(":", 1)[1]
    guard = CallbackGuard(rebinding, allowed_ports=[int(port)])
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


# --- IPv6 forms of internal addresses ---------------------------------------------------


@pytest.mark.parametrize(
    "address",
    [
        "fec0::1",  # site-local
        "fec0:1:2::3",
        "2002:7f00:1::1",  # 6to4 of 127.0.0.1
        "2002:a00:1::1",  # 6to4 of 10.0.0.1
        "2002:a9fe:a9fe::1",  # 6to4 of the metadata server
        "2002:c0a8:101::",  # 6to4 of 192.168.1.1
        "64:ff9b::a00:1",  # NAT64 of 10.0.0.1
        "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
        "64:ff9b:1::a00:1",  # local-use NAT64
        "::a00:1",  # IPv4-compatible 10.0.0.1
        "::7f00:1",  # IPv4-compatible 127.0.0.1
        "::ffff:a9fe:a9fe",  # IPv4-mapped metadata server
        "2001:0:4136:e378:8000:63bf:f5ff:fffe",  # Teredo, client 10.0.0.1
    ],
)
def test_ipv6_forms_of_internal_addresses_are_refused(address: str) -> None:
    with pytest.raises(CallbackRefused):
        CallbackGuard(resolver(DNS)).check(f"https://[{address}]/hook")
    named = CallbackGuard(resolver({"v6.example.com": [address]}))
    with pytest.raises(CallbackRefused):
        named.check("https://v6.example.com/hook")


def test_a_6to4_form_of_a_public_address_is_allowed() -> None:
    assert CallbackGuard(resolver(DNS)).check("https://[2002:5db8:d822::1]/h") == [
        "2002:5db8:d822::1"
    ]


# --- ports ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.example.com:8443/h",
        "https://hooks.example.com:22/h",
        "https://hooks.example.com:80/h",
        "http://hooks.example.com:443/h",
        "http://hooks.example.com:8080/h",
        "https://93.184.216.34:6379/h",
    ],
)
def test_only_the_schemes_own_port_is_allowed_by_default(url: str) -> None:
    with pytest.raises(CallbackRefused):
        CallbackGuard(resolver(DNS)).check(url)


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.example.com/h",
        "https://hooks.example.com:443/h",
        "http://hooks.example.com:80/h",
    ],
)
def test_the_default_ports_are_allowed(url: str) -> None:
    assert CallbackGuard(resolver(DNS)).check(url) == ["93.184.216.34"]


def test_a_configured_port_is_allowed() -> None:
    guard = CallbackGuard(resolver(DNS), allowed_ports=[8443])
    assert guard.check("https://hooks.example.com:8443/h") == ["93.184.216.34"]
    with pytest.raises(CallbackRefused):
        guard.check("https://hooks.example.com:9443/h")


def test_loopback_on_any_port_only_where_loopback_is_allowed() -> None:
    local = CallbackGuard(resolver(DNS), allow_loopback=True)
    assert local.check("http://rebind.example.com:8123/h") == ["127.0.0.1"]
    with pytest.raises(CallbackRefused):
        local.check("https://hooks.example.com:8123/h")  # public hosts keep the port rule


def test_the_ports_setting_reaches_the_intake_guard(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    # An address literal: the guard resolves nothing.
    url = "https://93.184.216.34:8443/h"
    closed = create_app(settings, adapters, clock).test_client()
    assert_problem(post(closed, body={**BODY, "callback_url": url}), 400, "callback-url-refused")
    opened = settings.model_copy(update={"callback_ports": "8443, 9443"})
    client = create_app(opened, adapters, clock).test_client()
    assert post(client, body={**BODY, "callback_url": url}, key="k-2").status_code == 202


def test_a_ports_setting_that_is_not_ports_is_refused() -> None:
    with pytest.raises(ValueError, match="GRADEQ_CALLBACK_PORTS"):
        Settings(callback_ports="443,70000")


# --- what a refusal tells, and what it logs ---------------------------------------------


REFUSED_AT_SUBMIT = [
    "https://localhost.invalid/h",  # does not resolve
    "https://rebind.example.com/h",  # resolves to loopback
    "https://inside.example.com/h",  # resolves to a private address
    "https://metadata.google.internal/h",
    "https://mixed.example.com/h",
    "https://hooks.example.com:8443/h",
]


def test_every_refusal_tells_the_client_the_same_and_names_nothing(
    client: FlaskClient, caplog: pytest.LogCaptureFixture
) -> None:
    details = set()
    for i, url in enumerate(REFUSED_AT_SUBMIT):
        with caplog.at_level(logging.WARNING, logger="shared.http.callback_guard"):
            response = post(client, body={**BODY, "callback_url": url}, key=f"k-{i}")
        problem = assert_problem(response, 400, "callback-url-refused")
        details.add(problem["detail"])
        text = response.get_data(as_text=True)
        host = url.split("/")[2].split(":")[0]
        for internal in (host, "10.1.2.3", "127.0.0.1", "169.254", "192.168", "does not resolve"):
            assert internal not in text
        assert host in caplog.text  # the reason, for the operator
    assert len(details) == 1
    assert "does not resolve" in caplog.text and "private" in caplog.text


@pytest.mark.parametrize(
    "url",
    [
        "https://alice:s3cret-pass@hooks.example.com/h",
        "https://s3cret-token@hooks.example.com/h",
        "https://:s3cret-pass@hooks.example.com/h",
    ],
)
def test_user_information_is_refused_at_submit_and_never_logged(
    client: FlaskClient,
    adapters: Adapters,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    url: str,
) -> None:
    with caplog.at_level(logging.DEBUG):
        response = post(client, body={**BODY, "callback_url": url})
    problem = assert_problem(response, 400, "validation-error")
    assert [e["field"] for e in problem["errors"]] == ["callback_url"]
    assert "s3cret" not in response.get_data(as_text=True)
    assert "s3cret" not in caplog.text
    assert "s3cret" not in capsys.readouterr().out
    assert queue_of(adapters).tasks == []


def test_the_guard_refuses_user_information_without_logging_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.DEBUG), pytest.raises(CallbackRefused):
        CallbackGuard(resolver(DNS)).check("https://alice:s3cret@hooks.example.com/h")
    assert "user information" in caplog.text
    assert "s3cret" not in caplog.text
