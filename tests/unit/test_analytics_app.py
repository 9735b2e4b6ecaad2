"""The analytics subscriber: each event recorded once, stats over what was recorded."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from services.analytics.app import create_app
from services.analytics.stats import summarize
from shared.adapters.embedded.api_key_store import SqliteApiKeyStore
from shared.adapters.embedded.processed_events import SqliteProcessedEvents
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.api_keys import ApiKey
from shared.domain.events import GradingCompleted, Outcome
from tests.contract.harness_events import sample_event
from tests.fakes import FakeProcessedEvents
from tests.support.push import (
    AUTH,
    PUSH_TOKEN,
    pubsub_push_body,
    restored_root_logger,
)


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """create_app configures the root logger; give the next test the logger it had."""
    with restored_root_logger():
        yield


READER_KEY, _READER = ApiKey.issue(
    "auditor", datetime(2025, 1, 1, tzinfo=UTC), key_id="auditor", secret="a" * 43
)
OUTSIDER_KEY, _OUTSIDER = ApiKey.issue(
    "client-a", datetime(2025, 1, 1, tzinfo=UTC), key_id="outsider", secret="o" * 43
)
READER = {"Authorization": f"Bearer {READER_KEY}"}
OPERATOR_KEY = "operator-key-for-analytics-tests"
OPERATOR = {"Authorization": f"Bearer {OPERATOR_KEY}"}


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(
        data_dir=tmp_path,
        push_token=PUSH_TOKEN,  # type: ignore[arg-type]
        analytics_readers="auditor",
        operator_keys=f"ops={OPERATOR_KEY}",  # type: ignore[arg-type]
    )


@pytest.fixture
def keys(settings: Settings) -> SqliteApiKeyStore:
    store = SqliteApiKeyStore(SqliteDatabase(settings.database_path))
    store.add(_READER)
    store.add(_OUTSIDER)
    return store


@pytest.fixture
def client(
    settings: Settings, processed: SqliteProcessedEvents, keys: SqliteApiKeyStore
) -> FlaskClient:
    return create_app(settings, processed, processed, keys).test_client()


def push_body(event: GradingCompleted, message_id: str = "201") -> dict[str, Any]:
    return pubsub_push_body(event, "analytics", message_id)


def test_an_event_is_recorded_with_its_publish_time(
    client: FlaskClient, processed: SqliteProcessedEvents
) -> None:
    event = sample_event()
    response = client.post("/pubsub/push", json=push_body(event), headers=AUTH)
    assert response.status_code == 204
    [record] = processed.records("analytics")
    data = event.data()
    del data["callback_url"]
    assert record == {
        **data,
        "event_id": event.event_id,
        "occurred_at": "2025-03-04T05:06:12.373456+00:00",
        "publish_time": "2025-03-04T05:06:13.500000+00:00",
    }


def test_duplicates_are_recorded_once(
    client: FlaskClient, processed: SqliteProcessedEvents
) -> None:
    event = sample_event()
    for message_id in ("1", "2", "3"):
        response = client.post("/pubsub/push", json=push_body(event, message_id), headers=AUTH)
        assert response.status_code == 204
    assert len(processed.records("analytics")) == 1


def test_stats_count_outcomes_and_take_medians(client: FlaskClient) -> None:
    events = [
        sample_event(Outcome.SUCCEEDED, key="a"),
        sample_event(Outcome.SUCCEEDED, key="b"),
        sample_event(Outcome.FAILED, key="c"),
        sample_event(Outcome.CANCELLED, key="d"),
    ]
    for event in [*events, events[0]]:
        client.post("/pubsub/push", json=push_body(event), headers=AUTH)
    stats = client.get("/v1/stats", headers=OPERATOR).json
    assert stats == {
        "events": 4,
        "by_outcome": {"succeeded": 2, "failed": 1, "cancelled": 1},
        "median_processing_ms": 3250.0,
        "median_queue_wait_ms": 2000.0,
    }


def test_summary_of_nothing_and_of_an_even_count() -> None:
    assert summarize([]) == {
        "events": 0,
        "by_outcome": {"succeeded": 0, "failed": 0, "cancelled": 0},
        "median_processing_ms": None,
        "median_queue_wait_ms": None,
    }
    timed = [
        {"outcome": "succeeded", "timings": {"processing_ms": ms, "queue_wait_ms": None}}
        for ms in (100, 200, 400, 1000)
    ]
    summary = summarize(timed)
    assert (summary["median_processing_ms"], summary["median_queue_wait_ms"]) == (300.0, None)


def test_stats_need_a_store_that_lists_records(settings: Settings, keys: SqliteApiKeyStore) -> None:
    client = create_app(settings, FakeProcessedEvents(), api_keys=keys).test_client()
    response = client.get("/v1/stats", headers=READER)
    assert response.status_code == 501
    assert response.mimetype == "application/problem+json"


def test_pushes_without_the_token_are_refused(
    client: FlaskClient, processed: SqliteProcessedEvents
) -> None:
    response = client.post("/pubsub/push", json=push_body(sample_event()))
    assert response.status_code == 401
    assert response.mimetype == "application/problem+json"
    assert processed.records("analytics") == []


def test_a_malformed_envelope_is_acknowledged_and_recorded_once(
    client: FlaskClient, processed: SqliteProcessedEvents
) -> None:
    for _ in range(2):
        response = client.post("/pubsub/push", data="not json", headers=AUTH)
        assert response.status_code == 204
    [record] = processed.records("analytics.malformed")
    assert "JSON object" in str(record["reason"])
    assert processed.records("analytics") == []


def test_probes(client: FlaskClient) -> None:
    assert client.get("/healthz").json == {"status": "ok"}
    assert client.get("/readyz").json == {"status": "ok", "checks": {"processed_events": "ok"}}


@pytest.mark.parametrize("path", ["/v1/stats", "/v1/events/some-job"])
def test_reads_need_a_readers_api_key(client: FlaskClient, path: str) -> None:
    missing = client.get(path)
    assert missing.status_code == 401 and missing.mimetype == "application/problem+json"
    wrong = client.get(path, headers={"Authorization": "Bearer gq_auditor_" + "x" * 43})
    assert wrong.status_code == 401
    outsider = client.get(path, headers={"Authorization": f"Bearer {OUTSIDER_KEY}"})
    assert outsider.status_code == 403
    assert outsider.json is not None and outsider.json["type"].endswith("/not-an-analytics-reader")
    assert client.get(path, headers=READER).status_code == 200


def test_a_revoked_readers_key_is_refused(client: FlaskClient, keys: SqliteApiKeyStore) -> None:
    keys.revoke("auditor", datetime(2025, 6, 1, tzinfo=UTC))
    assert client.get("/v1/stats", headers=READER).status_code == 401


def test_a_failing_credential_is_throttled_and_a_valid_key_still_reads(
    settings: Settings, processed: SqliteProcessedEvents, keys: SqliteApiKeyStore
) -> None:
    """40 bad tries with one credential: the first 20 are refused as unknown, the rest
    answered 429 before any lookup; the reader's and the operator's keys from the same
    address still pass."""
    client = create_app(settings, processed, processed, keys, FrozenClock()).test_client()
    bad = {"Authorization": "Bearer gq_auditor_" + "x" * 43}
    statuses = [client.get("/v1/stats", headers=bad).status_code for _ in range(40)]
    assert statuses == [401] * settings.auth_failure_burst + [429] * (
        40 - settings.auth_failure_burst
    )
    refused = client.get("/v1/stats", headers=bad)
    assert refused.json is not None
    assert refused.json["type"].endswith("/too-many-failed-authentications")
    assert int(refused.headers["Retry-After"]) >= 1
    assert client.get("/v1/stats", headers=READER).status_code == 200
    assert client.get("/v1/stats", headers=OPERATOR).status_code == 200


def test_a_wrong_operator_key_is_throttled_too(
    settings: Settings, processed: SqliteProcessedEvents, keys: SqliteApiKeyStore
) -> None:
    client = create_app(settings, processed, processed, keys, FrozenClock()).test_client()
    wrong = {"Authorization": "Bearer not-the-operator-key"}
    statuses = {client.get("/v1/usage", headers=wrong).status_code for _ in range(40)}
    assert statuses == {401, 429}
    assert client.get("/v1/usage", headers=OPERATOR).status_code == 200


def old_style_push(event: GradingCompleted, callback_url: str, message_id: str) -> dict[str, Any]:
    """A push of an event published before events left the callback URL out."""
    body = push_body(event, message_id)
    data = json.loads(base64.b64decode(body["message"]["data"]))
    data["callback_url"] = callback_url
    body["message"]["data"] = base64.b64encode(json.dumps(data).encode()).decode()
    return body


def test_a_client_reader_sees_only_its_own_clients_records(client: FlaskClient) -> None:
    mine = sample_event(Outcome.SUCCEEDED, key="mine", client_id="auditor")
    my_users = sample_event(Outcome.CANCELLED, key="user", client_id="auditor:user:uid-7")
    theirs = sample_event(Outcome.FAILED, key="theirs", client_id="client-a")
    lookalike = sample_event(Outcome.FAILED, key="look", client_id="auditors:user:uid-7")
    for n, event in enumerate((mine, my_users, theirs, lookalike)):
        client.post("/pubsub/push", json=push_body(event, str(n)), headers=AUTH)
    stats = client.get("/v1/stats", headers=READER).json
    assert stats is not None and stats["events"] == 2
    assert stats["by_outcome"] == {"succeeded": 1, "failed": 0, "cancelled": 1}
    other = client.get(f"/v1/events/{theirs.job_id}", headers=READER).json
    assert other == {"job_id": theirs.job_id, "events": []}
    own = client.get(f"/v1/events/{mine.job_id}", headers=READER).json
    assert own is not None and len(own["events"]) == 1
    usage = client.get("/v1/usage", headers=READER).json
    assert usage is not None and set(usage["by_client"]) <= {"auditor"}


def test_an_operator_reads_every_client(client: FlaskClient) -> None:
    for n, who in enumerate(("auditor", "client-a", "client-b")):
        event = sample_event(key=f"k{n}", client_id=who)
        client.post("/pubsub/push", json=push_body(event, str(n)), headers=AUTH)
    stats = client.get("/v1/stats", headers=OPERATOR).json
    assert stats is not None and stats["events"] == 3


def test_callback_urls_are_neither_recorded_nor_reported(
    client: FlaskClient, processed: SqliteProcessedEvents
) -> None:
    url = "https://client.example/hook?token=secret-token"
    event = sample_event(client_id="auditor")
    client.post("/pubsub/push", json=old_style_push(event, url, "1"), headers=AUTH)
    # A record stored by an earlier version, which kept the URL.
    processed.add("analytics", "older", {**event.data(), "event_id": "older", "callback_url": url})
    for record in processed.records("analytics"):
        if record["event_id"] == event.event_id:
            assert "callback_url" not in record
    for reader in (READER, OPERATOR):
        answer = client.get(f"/v1/events/{event.job_id}", headers=reader)
        assert answer.status_code == 200
        assert len(answer.json["events"]) == 2  # type: ignore[index]
        assert "secret-token" not in answer.get_data(as_text=True)
