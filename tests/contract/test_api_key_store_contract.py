"""What every ApiKeyStore must guarantee: digests only, lookup by id, list, revoke."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.domain.api_keys import ApiKey, ApiKeyNotFound
from shared.ports import ApiKeyStore

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_a_stored_key_round_trips_and_matches_only_its_key(api_key_store: ApiKeyStore) -> None:
    key, record = ApiKey.issue("client-a", T0, T0 + timedelta(days=30))
    api_key_store.add(record)
    stored = api_key_store.get(record.key_id)
    assert stored == record
    assert stored is not None and stored.matches(key) and not stored.matches(key + "x")
    assert key not in repr(stored.to_record())


def test_an_unknown_id_is_none(api_key_store: ApiKeyStore) -> None:
    assert api_key_store.get("nope") is None


def test_list_all_or_one_clients_keys_oldest_first(api_key_store: ApiKeyStore) -> None:
    _, first = ApiKey.issue("client-a", T0)
    _, second = ApiKey.issue("client-b", T0 + timedelta(seconds=1))
    _, third = ApiKey.issue("client-a", T0 + timedelta(seconds=2))
    for record in (second, third, first):
        api_key_store.add(record)
    assert [k.key_id for k in api_key_store.list()] == [
        first.key_id,
        second.key_id,
        third.key_id,
    ]
    assert [k.key_id for k in api_key_store.list("client-a")] == [first.key_id, third.key_id]


def test_revoke_keeps_the_record_and_the_first_time(api_key_store: ApiKeyStore) -> None:
    _, record = ApiKey.issue("client-a", T0)
    api_key_store.add(record)
    revoked = api_key_store.revoke(record.key_id, T0 + timedelta(hours=1))
    assert revoked.revoked_at == T0 + timedelta(hours=1)
    api_key_store.revoke(record.key_id, T0 + timedelta(hours=2))
    stored = api_key_store.get(record.key_id)
    assert stored is not None and stored.revoked_at == T0 + timedelta(hours=1)
    assert not stored.usable(T0 + timedelta(hours=1))


def test_revoking_an_unknown_key_raises(api_key_store: ApiKeyStore) -> None:
    with pytest.raises(ApiKeyNotFound):
        api_key_store.revoke("nope", T0)
