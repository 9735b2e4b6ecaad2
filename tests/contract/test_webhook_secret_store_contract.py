"""What every WebhookSecretStore must guarantee: sealed secrets only, list per client,
expiry that keeps the earliest time, unknown ids refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from services.notification.client_secrets import ClientSecrets
from services.notification.sealing import Sealer, new_sealing_key
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.adapters.embedded.webhook_secret_store import SqliteWebhookSecretStore
from shared.clock import FrozenClock
from shared.domain.webhook_secrets import WebhookSecret, WebhookSecretNotFound
from shared.ports import WebhookSecretStore

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(params=["embedded", "google"])
def webhook_secret_store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """WebhookSecretStore: SQLite, or Firestore on the official emulator."""
    if request.param == "google":
        from shared.adapters.google.webhook_secret_store import FirestoreWebhookSecretStore

        return FirestoreWebhookSecretStore(
            request.getfixturevalue("firestore_clean"), "webhook_secrets"
        )
    return SqliteWebhookSecretStore(SqliteDatabase(tmp_path / "secrets.sqlite3"))


def record(client_id: str, at: datetime, secret_id: str | None = None) -> WebhookSecret:
    return WebhookSecret(secret_id or WebhookSecret.new_id(), client_id, "k1", "c2VhbGVk", at)


def test_a_stored_secret_round_trips(webhook_secret_store: WebhookSecretStore) -> None:
    stored = record("client-a", T0)
    webhook_secret_store.add(stored)
    assert webhook_secret_store.list("client-a") == [stored]


def test_an_id_is_stored_once(webhook_secret_store: WebhookSecretStore) -> None:
    webhook_secret_store.add(record("client-a", T0, "same"))
    with pytest.raises(ValueError, match="already exists"):
        webhook_secret_store.add(record("client-b", T0, "same"))
    assert [s.client_id for s in webhook_secret_store.list()] == ["client-a"]


def test_list_all_or_one_clients_secrets_oldest_first(
    webhook_secret_store: WebhookSecretStore,
) -> None:
    first, second, third = (
        record("client-a", T0),
        record("client-b", T0 + timedelta(seconds=1)),
        record("client-a", T0 + timedelta(seconds=2)),
    )
    for secret in (second, third, first):
        webhook_secret_store.add(secret)
    assert webhook_secret_store.list() == [first, second, third]
    assert webhook_secret_store.list("client-a") == [first, third]
    assert webhook_secret_store.list("client-c") == []


def test_expire_keeps_the_earliest_time(webhook_secret_store: WebhookSecretStore) -> None:
    secret = record("client-a", T0)
    webhook_secret_store.add(secret)
    first = webhook_secret_store.expire(secret.secret_id, T0 + timedelta(hours=2))
    assert first.expires_at == T0 + timedelta(hours=2)
    webhook_secret_store.expire(secret.secret_id, T0 + timedelta(hours=5))
    earlier = webhook_secret_store.expire(secret.secret_id, T0 + timedelta(hours=1))
    assert earlier.expires_at == T0 + timedelta(hours=1)
    [stored] = webhook_secret_store.list("client-a")
    assert stored.expires_at == T0 + timedelta(hours=1)
    assert stored.signs_at(T0) and not stored.signs_at(T0 + timedelta(hours=1))


def test_expiring_an_unknown_secret_raises(webhook_secret_store: WebhookSecretStore) -> None:
    with pytest.raises(WebhookSecretNotFound):
        webhook_secret_store.expire("nope", T0)


def test_the_store_never_holds_the_secret_in_plain_text(
    webhook_secret_store: WebhookSecretStore,
) -> None:
    clock = FrozenClock(T0)
    secrets = ClientSecrets(webhook_secret_store, Sealer.from_setting(new_sealing_key()), clock)
    issued = secrets.create("client-a")
    [stored] = webhook_secret_store.list("client-a")
    body = issued.secret.removeprefix("whsec_")
    assert body not in repr(stored.to_record())
    assert secrets.signing_secrets("client-a") == [issued.secret]
