"""Clients' webhook secrets: sealed at rest, bound to their record, rotated with an
overlap, managed by the admin command."""

from __future__ import annotations

import dataclasses
import io
import json
from datetime import timedelta
from pathlib import Path

import pytest

from services.notification import webhook_secrets as cli
from services.notification.client_secrets import ClientSecrets, SecretExists
from services.notification.sealing import Sealer, SecretUnreadable, new_sealing_key
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.adapters.embedded.webhook_secret_store import SqliteWebhookSecretStore
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.webhook_secrets import new_signing_secret

KEY = new_sealing_key()


@pytest.fixture
def store(tmp_path: Path) -> SqliteWebhookSecretStore:
    return SqliteWebhookSecretStore(SqliteDatabase(tmp_path / "gradeq.sqlite3"))


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
def secrets(store: SqliteWebhookSecretStore, clock: FrozenClock) -> ClientSecrets:
    return ClientSecrets(store, Sealer.from_setting(KEY), clock)


def test_a_sealed_secret_opens_only_in_its_own_record(
    secrets: ClientSecrets, store: SqliteWebhookSecretStore
) -> None:
    a = secrets.create("client-a")
    secrets.create("client-b")
    # Someone with write access to the store copies a's sealed secret into b's record.
    [b] = store.list("client-b")
    store.add(dataclasses.replace(b, secret_id="moved", sealed=a.record.sealed))
    store.expire(b.secret_id, FrozenClock().now())
    with pytest.raises(SecretUnreadable):
        secrets.signing_secrets("client-b")


def test_another_sealing_key_opens_nothing_but_an_added_one_still_opens_old_secrets(
    store: SqliteWebhookSecretStore, clock: FrozenClock
) -> None:
    issued = ClientSecrets(store, Sealer.from_setting(KEY), clock).create("client-a")
    stranger = ClientSecrets(store, Sealer.from_setting(new_sealing_key()), clock)
    with pytest.raises(SecretUnreadable):
        stranger.signing_secrets("client-a")
    rotated_key = Sealer.from_setting(f"{new_sealing_key()},{KEY}")
    assert ClientSecrets(store, rotated_key, clock).signing_secrets("client-a") == [issued.secret]


def test_rotation_signs_with_both_during_the_overlap_then_only_the_new(
    secrets: ClientSecrets, clock: FrozenClock
) -> None:
    old = secrets.create("client-a").secret
    clock.advance(timedelta(seconds=1))
    new = secrets.rotate("client-a", timedelta(hours=24)).secret
    assert secrets.signing_secrets("client-a") == [new, old]
    clock.advance(timedelta(hours=24))
    assert secrets.signing_secrets("client-a") == [new]


def test_create_refuses_a_second_current_secret(secrets: ClientSecrets) -> None:
    secrets.create("client-a")
    with pytest.raises(SecretExists):
        secrets.create("client-a")


def test_a_client_without_secrets_has_nothing_to_sign_with(secrets: ClientSecrets) -> None:
    assert secrets.signing_secrets("client-a") == []


def test_the_command_shows_the_secret_once_and_lists_without_it(
    tmp_path: Path,
    store: SqliteWebhookSecretStore,
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = Settings(data_dir=tmp_path, webhook_secrets_key=KEY)  # type: ignore[arg-type]
    assert cli.main(["create", "--client", "client-a"], store, settings) == 0
    made = json.loads(capsys.readouterr().out)
    assert made["secret"].startswith("whsec_") and made["client_id"] == "client-a"
    assert cli.main(["create", "--client", "client-a"], store, settings) == 1
    assert "rotate" in capsys.readouterr().err
    assert (
        cli.main(["rotate", "--client", "client-a", "--overlap-hours", "2"], store, settings) == 0
    )
    rotated = json.loads(capsys.readouterr().out)
    assert cli.main(["list", "--client", "client-a"], store, settings) == 0
    listing = capsys.readouterr().out
    assert made["secret"] not in listing and rotated["secret"] not in listing
    old, new = (json.loads(line) for line in listing.splitlines())
    assert old["secret_id"] == made["secret_id"] and old["expires_at"] is not None
    assert new["secret_id"] == rotated["secret_id"] and new["expires_at"] is None
    assert cli.main(["revoke", rotated["secret_id"]], store, settings) == 0
    assert cli.main(["revoke", "unknown"], store, settings) == 1


def test_the_command_needs_the_sealing_key_to_issue(
    tmp_path: Path, store: SqliteWebhookSecretStore, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = Settings(data_dir=tmp_path)
    assert cli.main(["create", "--client", "client-a"], store, settings) == 2
    assert "GRADEQ_WEBHOOK_SECRETS_KEY" in capsys.readouterr().err
    assert store.list() == []


def test_a_clients_existing_secret_can_be_adopted_then_rotated_away(
    tmp_path: Path,
    store: SqliteWebhookSecretStore,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = Settings(data_dir=tmp_path, webhook_secrets_key=KEY)  # type: ignore[arg-type]
    shared = new_signing_secret()
    monkeypatch.setattr("sys.stdin", io.StringIO(shared + "\n"))
    assert cli.main(["create", "--client", "client-a", "--adopt-from-stdin"], store, settings) == 0
    assert json.loads(capsys.readouterr().out)["secret"] == shared
    secrets = ClientSecrets(store, Sealer.from_setting(KEY), FrozenClock())
    assert secrets.signing_secrets("client-a") == [shared]
    monkeypatch.setattr("sys.stdin", io.StringIO("not-a-secret\n"))
    assert cli.main(["create", "--client", "client-b", "--adopt-from-stdin"], store, settings) == 2
    assert "whsec_" in capsys.readouterr().err
    assert store.list("client-b") == []
