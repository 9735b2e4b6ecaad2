"""The notification subscriber: signed webhooks, dedup on the event id, redelivery on failure."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import requests_mock as rm
from flask.testing import FlaskClient
from standardwebhooks.webhooks import Webhook

from services.notification.app import create_app
from shared.adapters.embedded.processed_events import SqliteProcessedEvents
from shared.codecs.cloudevent import EVENT_SOURCE, EVENT_TYPE
from shared.config.settings import Settings
from shared.domain.events import GradingCompleted
from shared.http.callback_guard import CallbackGuard
from tests.contract.harness_events import CALLBACK_URL, sample_event
from tests.support.push import (
    AUTH,
    PUSH_TOKEN,
    pubsub_push_body,
    restored_root_logger,
)

SECRET = "whsec_" + base64.b64encode(b"gradeq-test-webhook-secret-32byt").decode()


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """create_app configures the root logger; give the next test the logger it had."""
    with restored_root_logger():
        yield


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(
        data_dir=tmp_path,
        push_token=PUSH_TOKEN,  # type: ignore[arg-type]
        webhook_secret=SECRET,  # type: ignore[arg-type]
        webhook_timeout_s=0.5,
    )


#: The callback host's addresses as a test resolver reports them (no DNS is asked; the
#: requests_mock fixture answers every request, so nothing is sent anywhere).
PUBLIC_DNS = {"client.example": ["93.184.216.34"]}


def fixed_resolver(table: dict[str, list[str]]) -> Any:
    def resolve(host: str, port: int) -> list[str]:
        return table[host]

    return resolve


@pytest.fixture
def guard() -> CallbackGuard:
    return CallbackGuard(fixed_resolver(PUBLIC_DNS))


@pytest.fixture
def client(
    settings: Settings, processed: SqliteProcessedEvents, guard: CallbackGuard
) -> FlaskClient:
    return create_app(settings, processed, guard).test_client()


def push_body(event: GradingCompleted, message_id: str = "101") -> dict[str, Any]:
    return pubsub_push_body(event, "notification", message_id)


def test_the_webhook_is_signed_and_carries_the_cloudevent(
    client: FlaskClient, processed: SqliteProcessedEvents, requests_mock: rm.Mocker
) -> None:
    event = sample_event()
    hook = requests_mock.post(CALLBACK_URL, status_code=200)
    response = client.post("/pubsub/push", json=push_body(event), headers=AUTH)
    assert response.status_code == 204
    [sent] = hook.request_history
    headers = dict(sent.headers)
    document = Webhook(SECRET).verify(sent.body, headers)
    assert headers["webhook-id"] == event.event_id
    assert headers["Content-Type"] == "application/cloudevents+json"
    assert document["specversion"] == "1.0"
    assert (document["id"], document["type"], document["source"]) == (
        event.event_id,
        EVENT_TYPE,
        EVENT_SOURCE,
    )
    assert document["time"] == "2025-03-04T05:06:12.373456Z"
    assert document["data"] == event.data()
    assert processed.contains("notification", event.event_id)


def test_a_tampered_webhook_does_not_verify(client: FlaskClient, requests_mock: rm.Mocker) -> None:
    hook = requests_mock.post(CALLBACK_URL, status_code=204)
    client.post("/pubsub/push", json=push_body(sample_event()), headers=AUTH)
    [sent] = hook.request_history
    other = "whsec_" + base64.b64encode(b"another-secret-another-secret-32").decode()
    with pytest.raises(Exception, match="No matching signature"):
        Webhook(other).verify(sent.body, dict(sent.headers))


def test_a_redelivered_event_is_not_sent_again(
    client: FlaskClient, requests_mock: rm.Mocker
) -> None:
    event = sample_event()
    hook = requests_mock.post(CALLBACK_URL, status_code=202)
    first = client.post("/pubsub/push", json=push_body(event, "1"), headers=AUTH)
    again = client.post("/pubsub/push", json=push_body(event, "2"), headers=AUTH)
    assert (first.status_code, again.status_code) == (204, 204)
    assert hook.call_count == 1


@pytest.mark.parametrize(
    "failure",
    [
        {"status_code": 500},
        {"status_code": 404},
        {"status_code": 302, "headers": {"Location": "https://elsewhere.example/"}},
        {"exc": requests.exceptions.ReadTimeout},
        {"exc": requests.exceptions.ConnectionError},
    ],
    ids=["500", "404", "redirect", "timeout", "unreachable"],
)
def test_a_client_failure_is_answered_non_2xx_and_not_recorded(
    client: FlaskClient,
    processed: SqliteProcessedEvents,
    requests_mock: rm.Mocker,
    failure: dict[str, Any],
) -> None:
    event = sample_event()
    requests_mock.post(CALLBACK_URL, [failure, {"status_code": 200}])
    failed = client.post("/pubsub/push", json=push_body(event), headers=AUTH)
    assert failed.status_code == 502
    assert failed.mimetype == "application/problem+json"
    assert failed.json is not None and failed.json["type"].endswith("/callback-failed")
    assert "token=abc" not in failed.json["detail"]  # the callback URL's query stays private
    assert not processed.contains("notification", event.event_id)
    redelivered = client.post("/pubsub/push", json=push_body(event, "102"), headers=AUTH)
    assert redelivered.status_code == 204
    assert processed.contains("notification", event.event_id)


def test_an_event_without_callback_is_only_recorded(
    client: FlaskClient, processed: SqliteProcessedEvents, requests_mock: rm.Mocker
) -> None:
    event = sample_event(callback_url=None)
    response = client.post("/pubsub/push", json=push_body(event), headers=AUTH)
    assert response.status_code == 204
    assert requests_mock.call_count == 0
    assert processed.contains("notification", event.event_id)


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": PUSH_TOKEN}]
)
def test_pushes_without_the_token_are_refused(
    client: FlaskClient,
    processed: SqliteProcessedEvents,
    requests_mock: rm.Mocker,
    headers: dict[str, str],
) -> None:
    event = sample_event()
    response = client.post("/pubsub/push", json=push_body(event), headers=headers)
    assert response.status_code == 401
    assert response.mimetype == "application/problem+json"
    assert requests_mock.call_count == 0
    assert not processed.contains("notification", event.event_id)


def test_a_malformed_envelope_is_acknowledged_and_recorded_once(
    client: FlaskClient, processed: SqliteProcessedEvents, requests_mock: rm.Mocker
) -> None:
    body = {"message": {"data": "e30=", "messageId": "m-77"}}
    for _ in range(3):
        response = client.post("/pubsub/push", json=body, headers=AUTH)
        assert response.status_code == 204  # acknowledged: redelivery cannot fix it
    [record] = processed.records("notification.malformed")
    assert record["reason"]
    assert processed.contains("notification.malformed", "message:m-77")
    assert requests_mock.call_count == 0


def test_probes(client: FlaskClient) -> None:
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 200


def test_log_lines_carry_the_job_id_and_no_secret(
    capsys: pytest.CaptureFixture[str],
    settings: Settings,
    processed: SqliteProcessedEvents,
    guard: CallbackGuard,
    requests_mock: rm.Mocker,
) -> None:
    client = create_app(settings, processed, guard).test_client()
    event = sample_event()
    requests_mock.post(CALLBACK_URL, status_code=500)
    client.post("/pubsub/push", json=push_body(event), headers=AUTH)
    requests_mock.post(CALLBACK_URL, status_code=200)
    client.post("/pubsub/push", json=push_body(event), headers=AUTH)
    output = capsys.readouterr().out
    lines = [json.loads(line) for line in output.splitlines()]
    assert {line["message"] for line in lines} >= {
        "request failed: callback at client.example answered HTTP 500",
        "event notified",
    }
    assert all(line["job_id"] == event.job_id for line in lines)
    assert SECRET not in output and PUSH_TOKEN not in output


@pytest.mark.parametrize("secret", ["", "whsec_***not-base64***"])
def test_the_app_needs_a_valid_webhook_secret(
    tmp_path: Path, processed: SqliteProcessedEvents, secret: str
) -> None:
    broken = Settings(data_dir=tmp_path, push_token=PUSH_TOKEN, webhook_secret=secret)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="GRADEQ_WEBHOOK_SECRET") as caught:
        create_app(broken, processed, CallbackGuard(fixed_resolver(PUBLIC_DNS)))
    assert "not-base64" not in str(caught.value)


def test_a_callback_resolving_to_loopback_at_send_time_is_recorded_not_sent(
    settings: Settings, processed: SqliteProcessedEvents, requests_mock: rm.Mocker
) -> None:
    # The name was public when the job was submitted; now it points inside.
    rebound = CallbackGuard(fixed_resolver({"client.example": ["127.0.0.1"]}))
    client = create_app(settings, processed, rebound).test_client()
    event = sample_event()
    response = client.post("/pubsub/push", json=push_body(event), headers=AUTH)
    assert response.status_code == 204  # acknowledged: redelivery cannot help
    assert requests_mock.call_count == 0
    record = processed.records("notification")[0]
    assert "loopback" in str(record["callback_refused"])
