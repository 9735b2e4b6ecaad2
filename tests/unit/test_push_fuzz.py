"""Fuzzing the worker's and the subscribers' push parsing with Hypothesis.

Whatever arrives with a valid push token - bytes, deep JSON, envelopes with wrong
fields - is acknowledged (2xx, so neither Cloud Tasks nor Pub/Sub redelivers it forever),
never a 5xx; a subscriber records each malformed delivery once.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.analytics.app import create_app as create_analytics
from services.notification.app import create_app as create_notification
from services.worker.app import create_app as create_worker
from shared.adapters.embedded.processed_events import SqliteProcessedEvents
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.http.callback_guard import CallbackGuard
from tests.fakes import ScriptedGrader
from tests.support.push import AUTH, PUSH_TOKEN, restored_root_logger

FUZZ = settings(
    max_examples=150,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
b64 = st.binary(max_size=60).map(lambda b: base64.b64encode(b).decode())
message = st.fixed_dictionaries(
    {},
    optional={
        "data": b64 | json_values,
        "messageId": st.text(max_size=12) | json_values,
        "attributes": st.dictionaries(st.text(max_size=8), st.text(max_size=8)) | json_values,
        "publishTime": st.sampled_from(["2025-03-04T05:06:13.5Z", "yesterday"]) | json_values,
    },
)
envelopes = st.fixed_dictionaries(
    {"message": message | json_values},
    optional={"subscription": st.text(max_size=20), "deliveryAttempt": json_values},
).map(lambda e: json.dumps(e).encode())
deep = st.integers(min_value=100, max_value=20_000).map(lambda n: b"[" * n + b"]" * n)
bodies = (
    st.binary(max_size=200) | json_values.map(lambda v: json.dumps(v).encode()) | envelopes | deep
)


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    with restored_root_logger():
        yield


@pytest.fixture
def subscriber_settings(tmp_path: Path) -> Settings:
    key = base64.b64encode(b"fuzz-webhook-sealing-key-32bytes").decode()
    return Settings(data_dir=tmp_path, push_token=PUSH_TOKEN, webhook_secrets_key=key)  # type: ignore[arg-type]


@pytest.fixture
def processed(subscriber_settings: Settings) -> SqliteProcessedEvents:
    return SqliteProcessedEvents(SqliteDatabase(subscriber_settings.database_path))


def subscribers(settings: Settings, processed: SqliteProcessedEvents) -> dict[str, FlaskClient]:
    # No callback is ever sent: no fuzzed body decodes to an event with a callback URL,
    # and the guard's resolver answers loopback, which it refuses.
    guard = CallbackGuard(lambda host, port: ["127.0.0.1"])
    return {
        "notification": create_notification(settings, processed, guard).test_client(),
        "analytics": create_analytics(settings, processed, processed).test_client(),
    }


def test_subscribers_acknowledge_and_record_every_malformed_delivery_once(
    subscriber_settings: Settings, processed: SqliteProcessedEvents
) -> None:
    clients = subscribers(subscriber_settings, processed)
    seen: list[bytes] = []

    @FUZZ
    @given(body=bodies)
    def deliver(body: bytes) -> None:
        for name, client in clients.items():
            response = client.post(
                "/pubsub/push",
                data=body,
                headers={**AUTH, "Content-Type": "application/json"},
            )
            assert response.status_code == 204, (name, body[:80], response.get_data()[:200])
        seen.append(body)

    deliver()
    # Redelivering what was already seen records nothing new.
    before = {n: len(processed.records(f"{n}.malformed")) for n in clients}
    for body in seen[:20]:
        for client in clients.values():
            client.post("/pubsub/push", data=body, headers=AUTH)
    after = {n: len(processed.records(f"{n}.malformed")) for n in clients}
    assert before == after and all(count > 0 for count in after.values())


def test_the_worker_acknowledges_every_malformed_task(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    grader = ScriptedGrader()
    client = create_worker(settings, adapters, grader, clock).test_client()
    task_headers = {"Authorization": f"Bearer {settings.push_token.get_secret_value()}"}

    @FUZZ
    @given(body=bodies | json_values.map(lambda v: json.dumps({"job_id": v}).encode()))
    def deliver(body: Any) -> None:
        response = client.post(
            "/tasks/grade",
            data=body,
            headers={
                **task_headers,
                "Content-Type": "application/json",
                "X-CloudTasks-TaskName": "t",
            },
        )
        assert 200 <= response.status_code < 300, (body[:80], response.get_data()[:200])

    deliver()
    assert grader.calls == 0
