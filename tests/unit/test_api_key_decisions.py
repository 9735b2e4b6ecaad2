"""What an API key is made of and when it works, pinned value by value."""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime, timedelta

import pytest

from shared.domain.api_keys import ApiKey, digest_of, key_id_of

NOW = datetime(2026, 5, 1, tzinfo=UTC)


def test_an_issued_key_has_a_12_hex_id_and_a_256_bit_secret() -> None:
    key, record = ApiKey.issue("client-a", NOW)
    match = re.fullmatch(r"gq_([0-9a-f]{12})_([A-Za-z0-9_\-]{43})", key)
    assert match is not None
    assert record == ApiKey(match.group(1), "client-a", digest_of(key), NOW, None)
    assert record.digest == hashlib.sha256(key.encode()).hexdigest()
    assert ApiKey.issue("client-a", NOW)[0] != key


def test_a_key_issued_with_an_id_and_secret_is_exactly_those() -> None:
    expires = NOW + timedelta(days=1)
    key, record = ApiKey.issue("c", NOW, expires, key_id="ops1", secret="s" * 16)
    assert key == "gq_ops1_" + "s" * 16
    assert record == ApiKey("ops1", "c", digest_of(key), NOW, expires)


@pytest.mark.parametrize("key_id", ["UPPER", "with-dash", "x" * 33])
def test_a_key_id_that_a_key_could_not_carry_is_refused(key_id: str) -> None:
    with pytest.raises(ValueError) as refused:
        ApiKey.issue("c", NOW, key_id=key_id)
    assert str(refused.value) == "a key id is 1-32 lowercase letters or digits"


@pytest.mark.parametrize(
    ("key", "key_id"),
    [
        ("gq_ops1_" + "s" * 16, "ops1"),
        ("gq_ops1_" + "s" * 15, None),
        ("xx_ops1_" + "s" * 16, None),
        ("gq__" + "s" * 16, None),
    ],
)
def test_the_key_id_is_read_from_a_well_formed_key_only(key: str, key_id: str | None) -> None:
    assert key_id_of(key) == key_id


def test_a_key_matches_only_itself() -> None:
    key, record = ApiKey.issue("c", NOW, key_id="k1", secret="s" * 16)
    assert record.matches(key)
    assert not record.matches(key + "x")


def test_a_key_works_until_it_expires_or_is_revoked() -> None:
    expires = NOW + timedelta(days=1)
    _, record = ApiKey.issue("c", NOW, expires, key_id="k1")
    assert record.usable(expires - timedelta(microseconds=1))
    assert not record.usable(expires)
    revoked = record.revoke(NOW)
    assert revoked.revoked_at == NOW and not revoked.usable(NOW)
    assert revoked.revoke(NOW + timedelta(hours=1)).revoked_at == NOW  # the first time stays
    _, forever = ApiKey.issue("c", NOW, key_id="k2")
    assert forever.usable(NOW + timedelta(days=3650))


def test_the_public_view_is_everything_but_the_digest() -> None:
    expires = NOW + timedelta(days=1)
    _, record = ApiKey.issue("c", NOW, expires, key_id="k1")
    revoked = record.revoke(NOW + timedelta(hours=2))
    assert revoked.public_view() == {
        "key_id": "k1",
        "client_id": "c",
        "created_at": "2026-05-01T00:00:00+00:00",
        "expires_at": "2026-05-02T00:00:00+00:00",
        "revoked_at": "2026-05-01T02:00:00+00:00",
    }
    assert record.public_view()["revoked_at"] is None


def test_a_record_round_trips() -> None:
    _, record = ApiKey.issue("c", NOW, NOW + timedelta(days=1), key_id="k1")
    revoked = record.revoke(NOW)
    assert ApiKey.from_record(revoked.to_record()) == revoked
    minimal = {k: v for k, v in record.to_record().items() if v is not None}
    del minimal["expires_at"]
    assert ApiKey.from_record(minimal) == ApiKey("k1", "c", record.digest, NOW)
