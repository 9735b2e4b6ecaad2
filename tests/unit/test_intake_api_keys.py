"""API keys: hashed at rest, bound to a client, expiring, revocable by the admin command."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from flask.testing import FlaskClient

from services.intake.app import create_app
from services.intake.auth import keys
from shared.adapters.embedded.api_key_store import SqliteApiKeyStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.api_keys import ApiKey
from tests.unit.test_intake_api import assert_problem, post


@pytest.fixture
def store(settings: Settings) -> SqliteApiKeyStore:
    return SqliteApiKeyStore(SqliteDatabase(settings.database_path))


@pytest.fixture
def client(settings: Settings, adapters: Adapters, clock: FrozenClock) -> FlaskClient:
    return create_app(settings, adapters, clock).test_client()


def test_no_credential_is_401(client: FlaskClient) -> None:
    response = client.post("/v1/grading-jobs", json={}, headers={"Idempotency-Key": "k"})
    assert_problem(response, 401, "unauthenticated")


@pytest.mark.parametrize("key", ["wrong", "gq_clienta_" + "x" * 43, "gq_nosuchid_" + "s" * 43])
def test_an_unknown_or_wrong_key_is_401(client: FlaskClient, key: str) -> None:
    assert_problem(post(client, api_key=key), 401, "unauthenticated")


def test_a_revoked_key_is_401(
    client: FlaskClient, store: SqliteApiKeyStore, clock: FrozenClock
) -> None:
    key, record = ApiKey.issue("client-c", clock.now())
    store.add(record)
    assert post(client, api_key=key).status_code == 202
    store.revoke(record.key_id, clock.now())
    assert_problem(post(client, api_key=key, key="k-2"), 401, "unauthenticated")


def test_an_expired_key_is_401(
    client: FlaskClient, store: SqliteApiKeyStore, clock: FrozenClock
) -> None:
    key, record = ApiKey.issue("client-c", clock.now(), clock.now() + timedelta(hours=1))
    store.add(record)
    assert post(client, api_key=key).status_code == 202
    clock.advance(timedelta(hours=1))
    assert_problem(post(client, api_key=key, key="k-2"), 401, "unauthenticated")


def test_the_admin_command_creates_lists_and_revokes(
    store: SqliteApiKeyStore,
    client: FlaskClient,
    settings: Settings,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert keys.main(["create", "--client", "acme", "--expires-in-days", "30"], store) == 0
    created = json.loads(capsys.readouterr().out)
    assert created["client_id"] == "acme" and created["expires_at"] is not None
    # Only the digest is stored: the key appears nowhere in the database file.
    database = SqliteDatabase(settings.database_path).connection()
    dump = "\n".join(database.iterdump())
    assert created["key"] not in dump
    assert post(client, api_key=created["key"]).status_code == 202

    assert keys.main(["list", "--client", "acme"], store) == 0
    listed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [k["key_id"] for k in listed] == [created["key_id"]]
    assert all("key" not in k and "digest" not in k for k in listed)

    assert keys.main(["revoke", created["key_id"]], store) == 0
    assert json.loads(capsys.readouterr().out)["revoked_at"] is not None
    assert_problem(post(client, api_key=created["key"], key="k-2"), 401, "unauthenticated")
    assert keys.main(["revoke", "unknown"], store) == 1


@pytest.mark.parametrize("days", ["0", "-1", "0.0", "-0.5", "nan", "1e12"])
def test_the_admin_command_refuses_an_expiry_that_is_not_ahead(
    store: SqliteApiKeyStore, capsys: pytest.CaptureFixture[str], days: str
) -> None:
    # "0" used to make a key that never expires.
    assert keys.main(["create", "--client", "acme", "--expires-in-days", days], store) == 2
    assert "--expires-in-days" in capsys.readouterr().err
    assert store.list("acme") == []


@pytest.mark.parametrize("client_id", ["acme:user:alice", ":user:", " "])
def test_the_admin_command_refuses_a_client_id_that_is_blank_or_a_user_scope(
    store: SqliteApiKeyStore, capsys: pytest.CaptureFixture[str], client_id: str
) -> None:
    before = store.list()
    assert keys.main(["create", "--client", client_id], store) == 2
    assert capsys.readouterr().out == ""
    assert store.list() == before


def test_a_stored_key_that_names_a_user_scope_is_refused(
    store: SqliteApiKeyStore, client: FlaskClient, clock: FrozenClock
) -> None:
    # A record written before ":user:" was reserved must not act as that user.
    good, record = ApiKey.issue("acme", clock.now(), key_id="old1")
    store.add(ApiKey(record.key_id, "acme:user:alice", record.digest, record.created_at))
    assert_problem(post(client, api_key=good), 401, "unauthenticated")
