"""The notification subscriber: webhooks signed per client, dedup on the event id,
redelivery on failure."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
import requests_mock as rm
from flask.testing import FlaskClient
from standardwebhooks.webhooks import Webhook

from services.notification.app import create_app
from services.notification.client_secrets import ClientSecrets
from services.notification.sealing import Sealer, new_sealing_key
from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.processed_events import SqliteProcessedEvents
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.adapters.embedded.webhook_secret_store import SqliteWebhookSecretStore
from shared.clock import SystemClock
from shared.codecs.cloudevent import EVENT_SOURCE, EVENT_TYPE, GRADE_POSTED_TYPE
from shared.config.settings import Settings
from shared.domain.events import GradePosted, GradingCompleted
from shared.domain.job import Job
from shared.domain.webhook_secrets import new_signing_secret
from shared.http.callback_guard import CallbackGuard
from tests.contract.harness_events import CALLBACK_URL, sample_job
from tests.support.push import (
    AUTH,
    PUSH_TOKEN,
    pubsub_push_body,
    restored_root_logger,
)

SEALING_KEY = new_sealing_key()


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
        webhook_secrets_key=SEALING_KEY,  # type: ignore[arg-type]
        webhook_timeout_s=0.5,
    )


@pytest.fixture
def jobs(settings: Settings) -> SqliteJobStore:
    return SqliteJobStore(SqliteDatabase(settings.database_path))


@pytest.fixture
def client_secrets(settings: Settings) -> ClientSecrets:
    store = SqliteWebhookSecretStore(SqliteDatabase(settings.database_path))
    return ClientSecrets(store, Sealer.from_setting(SEALING_KEY), SystemClock())


@pytest.fixture
def secret(client_secrets: ClientSecrets) -> str:
    """client-a's webhook secret, as `create` showed it once."""
    return client_secrets.create("client-a").secret


def stored(jobs: SqliteJobStore, job: Job) -> GradingCompleted:
    """Store the final job (where the notifier reads the callback URL); return its event."""
    jobs.create(job)
    return GradingCompleted.from_job(job)


@pytest.fixture
def event(jobs: SqliteJobStore, secret: str) -> GradingCompleted:
    """client-a's succeeded job with a callback URL, stored; client-a has a secret."""
    return stored(jobs, sample_job())


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
    client: FlaskClient,
    processed: SqliteProcessedEvents,
    requests_mock: rm.Mocker,
    event: GradingCompleted,
    secret: str,
) -> None:
    hook = requests_mock.post(CALLBACK_URL, status_code=200)
    response = client.post("/pubsub/push", json=push_body(event), headers=AUTH)
    assert response.status_code == 204
    [sent] = hook.request_history
    headers = dict(sent.headers)
    document = Webhook(secret).verify(sent.body, headers)
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
    assert document["data"]["client_id"] == "client-a"
    assert processed.contains("notification", event.event_id)


def test_each_client_s_webhooks_verify_only_with_its_own_secret(
    client: FlaskClient,
    jobs: SqliteJobStore,
    client_secrets: ClientSecrets,
    requests_mock: rm.Mocker,
) -> None:
    """Client a's receiver holds a's secret only: b's webhook must not verify with it."""
    secret_a = client_secrets.create("client-a").secret
    secret_b = client_secrets.create("client-b").secret
    hook = requests_mock.post(CALLBACK_URL, status_code=200)
    for who in ("client-a", "client-b"):
        event = stored(jobs, sample_job(client_id=who, key=f"key-{who}"))
        assert client.post("/pubsub/push", json=push_body(event), headers=AUTH).status_code == 204
    sent_a, sent_b = hook.request_history
    assert Webhook(secret_a).verify(sent_a.body, dict(sent_a.headers))
    assert Webhook(secret_b).verify(sent_b.body, dict(sent_b.headers))
    with pytest.raises(Exception, match="No matching signature"):
        Webhook(secret_a).verify(sent_b.body, dict(sent_b.headers))
    with pytest.raises(Exception, match="No matching signature"):
        Webhook(secret_b).verify(sent_a.body, dict(sent_a.headers))


def test_during_a_rotation_both_secrets_verify_and_after_it_only_the_new(
    client: FlaskClient,
    jobs: SqliteJobStore,
    client_secrets: ClientSecrets,
    requests_mock: rm.Mocker,
) -> None:
    old = client_secrets.create("client-a").secret
    new = client_secrets.rotate("client-a", timedelta(hours=1)).secret
    hook = requests_mock.post(CALLBACK_URL, status_code=200)
    event = stored(jobs, sample_job(key="during"))
    client.post("/pubsub/push", json=push_body(event), headers=AUTH)
    [during] = hook.request_history
    assert len(during.headers["webhook-signature"].split(" ")) == 2
    for secret in (old, new):
        assert Webhook(secret).verify(during.body, dict(during.headers))
    newest = client_secrets.rotate("client-a", timedelta(0)).secret
    event = stored(jobs, sample_job(key="after"))
    client.post("/pubsub/push", json=push_body(event), headers=AUTH)
    after = hook.request_history[1]
    assert Webhook(newest).verify(after.body, dict(after.headers))
    for retired in (old, new):
        with pytest.raises(Exception, match="No matching signature"):
            Webhook(retired).verify(after.body, dict(after.headers))


def test_a_client_without_a_secret_gets_no_webhook_and_the_reason_is_recorded(
    client: FlaskClient,
    processed: SqliteProcessedEvents,
    jobs: SqliteJobStore,
    requests_mock: rm.Mocker,
) -> None:
    event = stored(jobs, sample_job(client_id="client-without-secret"))
    response = client.post("/pubsub/push", json=push_body(event), headers=AUTH)
    assert response.status_code == 204  # acknowledged: the client polls, nothing unsigned
    assert requests_mock.call_count == 0
    [record] = processed.records("notification")
    assert record["callback_refused"] == "the client has no webhook secret"


def test_a_revoked_secret_no_longer_signs(
    client: FlaskClient,
    jobs: SqliteJobStore,
    client_secrets: ClientSecrets,
    requests_mock: rm.Mocker,
) -> None:
    issued = client_secrets.create("client-a")
    client_secrets.revoke(issued.record.secret_id)
    event = stored(jobs, sample_job())
    client.post("/pubsub/push", json=push_body(event), headers=AUTH)
    assert requests_mock.call_count == 0


def test_the_callback_url_is_read_from_the_job_not_the_event(
    client: FlaskClient, event: GradingCompleted, requests_mock: rm.Mocker
) -> None:
    assert event.data()["callback_url"] is None
    hook = requests_mock.post(CALLBACK_URL, status_code=200)
    client.post("/pubsub/push", json=push_body(event), headers=AUTH)
    assert hook.call_count == 1


def test_a_tampered_webhook_does_not_verify(
    client: FlaskClient, event: GradingCompleted, requests_mock: rm.Mocker
) -> None:
    hook = requests_mock.post(CALLBACK_URL, status_code=204)
    client.post("/pubsub/push", json=push_body(event), headers=AUTH)
    [sent] = hook.request_history
    with pytest.raises(Exception, match="No matching signature"):
        Webhook(new_signing_secret()).verify(sent.body, dict(sent.headers))


def test_a_redelivered_event_is_not_sent_again(
    client: FlaskClient, event: GradingCompleted, requests_mock: rm.Mocker
) -> None:
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
    event: GradingCompleted,
    failure: dict[str, Any],
) -> None:
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
    client: FlaskClient,
    processed: SqliteProcessedEvents,
    jobs: SqliteJobStore,
    requests_mock: rm.Mocker,
    secret: str,
) -> None:
    event = stored(jobs, sample_job(callback_url=None))
    response = client.post("/pubsub/push", json=push_body(event), headers=AUTH)
    assert response.status_code == 204
    assert requests_mock.call_count == 0
    assert processed.contains("notification", event.event_id)


def test_an_event_whose_job_is_gone_is_dropped_not_recorded(
    client: FlaskClient,
    processed: SqliteProcessedEvents,
    requests_mock: rm.Mocker,
    secret: str,
) -> None:
    """An event delivered after its job was erased: acknowledged, no webhook, no record."""
    event = GradingCompleted.from_job(sample_job())  # never stored: erased before delivery
    response = client.post("/pubsub/push", json=push_body(event), headers=AUTH)
    assert response.status_code == 204
    assert requests_mock.call_count == 0
    assert not processed.contains("notification", event.event_id)
    assert processed.records("notification") == []


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": PUSH_TOKEN}]
)
def test_pushes_without_the_token_are_refused(
    client: FlaskClient,
    processed: SqliteProcessedEvents,
    requests_mock: rm.Mocker,
    event: GradingCompleted,
    headers: dict[str, str],
) -> None:
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
    event: GradingCompleted,
    secret: str,
) -> None:
    client = create_app(settings, processed, guard).test_client()
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
    for private in (secret, SEALING_KEY, PUSH_TOKEN, "token=abc"):
        assert private not in output


@pytest.mark.parametrize("key", ["", "not-base64!", "c2hvcnQ="])
def test_the_app_needs_a_valid_sealing_key(
    tmp_path: Path, processed: SqliteProcessedEvents, key: str
) -> None:
    broken = Settings(data_dir=tmp_path, push_token=PUSH_TOKEN, webhook_secrets_key=key)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="GRADEQ_WEBHOOK_SECRETS_KEY") as caught:
        create_app(broken, processed, CallbackGuard(fixed_resolver(PUBLIC_DNS)))
    assert not key or key not in str(caught.value)


def test_secrets_sealed_by_a_key_no_longer_configured_are_a_server_error(
    settings: Settings,
    processed: SqliteProcessedEvents,
    guard: CallbackGuard,
    event: GradingCompleted,
    requests_mock: rm.Mocker,
) -> None:
    other = Settings(
        data_dir=settings.data_dir,
        push_token=PUSH_TOKEN,  # type: ignore[arg-type]
        webhook_secrets_key=new_sealing_key(),  # type: ignore[arg-type]
    )
    client = create_app(other, processed, guard).test_client()
    response = client.post("/pubsub/push", json=push_body(event), headers=AUTH)
    assert response.status_code == 500  # redelivered once the key is configured again
    assert response.json is not None
    assert response.json["type"].endswith("/webhook-secret-unreadable")
    assert requests_mock.call_count == 0
    assert not processed.contains("notification", event.event_id)


def test_a_callback_resolving_to_loopback_at_send_time_is_recorded_not_sent(
    settings: Settings,
    processed: SqliteProcessedEvents,
    requests_mock: rm.Mocker,
    event: GradingCompleted,
) -> None:
    # The name was public when the job was submitted; now it points inside.
    rebound = CallbackGuard(fixed_resolver({"client.example": ["127.0.0.1"]}))
    client = create_app(settings, processed, rebound).test_client()
    response = client.post("/pubsub/push", json=push_body(event), headers=AUTH)
    assert response.status_code == 204  # acknowledged: redelivery cannot help
    assert requests_mock.call_count == 0
    record = processed.records("notification")[0]
    assert "loopback" in str(record["callback_refused"])


def test_a_signed_in_users_job_is_signed_with_its_clients_secret(
    client: FlaskClient, jobs: SqliteJobStore, secret: str, requests_mock: rm.Mocker
) -> None:
    hook = requests_mock.post(CALLBACK_URL, status_code=200)
    event = stored(jobs, sample_job(client_id="client-a:user:uid-7"))
    assert client.post("/pubsub/push", json=push_body(event), headers=AUTH).status_code == 204
    [sent] = hook.request_history
    assert Webhook(secret).verify(sent.body, dict(sent.headers))


def test_a_practice_job_never_reaches_the_schools_webhook(
    client: FlaskClient, jobs: SqliteJobStore, secret: str, requests_mock: rm.Mocker
) -> None:
    hook = requests_mock.post(CALLBACK_URL, status_code=200)
    job = sample_job()
    practice = dataclasses.replace(
        job, author="ada", request=dataclasses.replace(job.request, practice=True)
    )
    event = stored(jobs, practice)
    assert event.practice and event.author == "ada"
    assert client.post("/pubsub/push", json=push_body(event), headers=AUTH).status_code == 204
    assert hook.request_history == []


POSTED_AT = datetime(2025, 3, 4, 6, 0, tzinfo=UTC)


def assignment_job() -> Job:
    """client-a's graded answer to an assignment (its rubric from the assignment)."""
    job = sample_job()
    request = dataclasses.replace(job.request, student_id="student-1", rubric_version=1)
    return dataclasses.replace(job, request=request)


def overridden_after_posting(jobs: SqliteJobStore) -> tuple[GradePosted, GradePosted]:
    """client-a's assignment job posted (version 1), then changed by a teacher (version 2);
    stored as it is after the change; the events of both versions."""
    job = assignment_job().post(POSTED_AT, "auto")
    assert job.posted is not None
    first = GradePosted.from_job(job)
    changed = dataclasses.replace(
        job,
        posted=dataclasses.replace(
            job.posted, version=2, score=4.0, source="teacher", by="teacher", reason="misread"
        ),
    )
    jobs.create(changed)
    return first, GradePosted.from_job(changed)


def test_a_teachers_change_after_posting_reaches_the_webhook_once_as_version_2(
    client: FlaskClient,
    processed: SqliteProcessedEvents,
    requests_mock: rm.Mocker,
    jobs: SqliteJobStore,
    secret: str,
) -> None:
    _, changed = overridden_after_posting(jobs)
    hook = requests_mock.post(CALLBACK_URL, status_code=200)
    body = pubsub_push_body(changed, "notification", "201")
    assert client.post("/pubsub/push", json=body, headers=AUTH).status_code == 204
    # Redelivered (same event, another message id): nothing new is sent.
    again = pubsub_push_body(changed, "notification", "202")
    assert client.post("/pubsub/push", json=again, headers=AUTH).status_code == 204
    [sent] = hook.request_history
    document = Webhook(secret).verify(sent.body, dict(sent.headers))
    assert sent.headers["webhook-id"] == changed.event_id
    assert document["type"] == GRADE_POSTED_TYPE
    assert document["id"] == changed.event_id
    assert document["data"]["version"] == 2
    assert (document["data"]["score"], document["data"]["source"]) == (4.0, "teacher")
    assert processed.contains("notification", changed.event_id)


def test_each_posted_version_is_its_own_webhook(
    client: FlaskClient,
    requests_mock: rm.Mocker,
    jobs: SqliteJobStore,
    secret: str,
) -> None:
    first, changed = overridden_after_posting(jobs)
    hook = requests_mock.post(CALLBACK_URL, status_code=200)
    for number, event in enumerate((first, changed)):
        body = pubsub_push_body(event, "notification", f"30{number}")
        assert client.post("/pubsub/push", json=body, headers=AUTH).status_code == 204
    ids = [sent.headers["webhook-id"] for sent in hook.request_history]
    assert ids == [first.event_id, changed.event_id]
    assert first.event_id != changed.event_id


def test_a_posted_grade_of_a_practice_job_never_reaches_the_webhook(
    client: FlaskClient, jobs: SqliteJobStore, secret: str, requests_mock: rm.Mocker
) -> None:
    hook = requests_mock.post(CALLBACK_URL, status_code=200)
    posted = assignment_job().post(POSTED_AT, "auto")
    assert posted.posted is not None
    event = GradePosted.from_job(posted)
    # The notifier goes by the stored job, whatever the event says.
    jobs.create(
        dataclasses.replace(posted, request=dataclasses.replace(posted.request, practice=True))
    )
    body = pubsub_push_body(event, "notification", "401")
    assert client.post("/pubsub/push", json=body, headers=AUTH).status_code == 204
    assert hook.request_history == []
