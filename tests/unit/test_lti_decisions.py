"""The LTI domain's decisions: a signing key's record read back field by field, what an
operator's listing shows of it, and an expiry that never moves later."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from shared.domain.lti import ToolKey

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def tool_key(expires_at: datetime | None = None) -> ToolKey:
    return ToolKey(
        kid="kid-1",
        sealing_key_id="kek-2",
        sealed="sealed-3",
        public_jwk={"kty": "RSA", "kid": "kid-1"},
        created_at=T0,
        signs_from=T0 + timedelta(hours=1),
        expires_at=expires_at,
    )


def test_a_key_record_holds_every_field_by_name() -> None:
    key = tool_key(expires_at=T0 + timedelta(hours=3))
    assert key.to_record() == {
        "kid": "kid-1",
        "sealing_key_id": "kek-2",
        "sealed": "sealed-3",
        "public_jwk": {"kty": "RSA", "kid": "kid-1"},
        "created_at": T0,
        "signs_from": T0 + timedelta(hours=1),
        "expires_at": T0 + timedelta(hours=3),
    }


def test_a_key_read_from_its_record_is_the_key_stored() -> None:
    key = tool_key(expires_at=T0 + timedelta(hours=3))
    record: dict[str, Any] = {
        "kid": "kid-1",
        "sealing_key_id": "kek-2",
        "sealed": "sealed-3",
        "public_jwk": {"kty": "RSA", "kid": "kid-1"},
        "created_at": T0,
        "signs_from": T0 + timedelta(hours=1),
        "expires_at": T0 + timedelta(hours=3),
    }
    read = ToolKey.from_record(record)
    assert read == key
    assert read.kid == "kid-1"
    assert read.sealing_key_id == "kek-2"
    assert read.sealed == "sealed-3"
    assert read.public_jwk == {"kty": "RSA", "kid": "kid-1"}
    assert read.created_at == T0
    assert read.signs_from == T0 + timedelta(hours=1)
    assert read.expires_at == T0 + timedelta(hours=3)


def test_a_record_without_an_expiry_reads_as_a_key_that_never_expires() -> None:
    record = tool_key().to_record()
    del record["expires_at"]
    assert ToolKey.from_record(record) == tool_key()


def test_the_listing_shows_the_times_but_never_the_sealed_key() -> None:
    assert tool_key(expires_at=T0 + timedelta(hours=3)).public_view() == {
        "kid": "kid-1",
        "created_at": "2026-03-01T12:00:00+00:00",
        "signs_from": "2026-03-01T13:00:00+00:00",
        "expires_at": "2026-03-01T15:00:00+00:00",
    }
    assert tool_key().public_view()["expires_at"] is None


def test_an_expiry_at_the_same_time_leaves_the_key_as_it_is() -> None:
    key = tool_key(expires_at=T0 + timedelta(hours=3))
    assert key.expire(T0 + timedelta(hours=3)) is key
    assert key.expire(T0 + timedelta(hours=4)) is key
    assert key.expire(T0 + timedelta(hours=2)).expires_at == T0 + timedelta(hours=2)
    assert tool_key().expire(T0).expires_at == T0
