"""The decisions of a webhook signing secret: its format, what it is bound to, and when it signs."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta

from shared.domain.webhook_secrets import (
    WebhookSecret,
    is_signing_secret,
    new_signing_secret,
    sealing_context,
)

T0 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)


def secret(expires_at: datetime | None = None) -> WebhookSecret:
    return WebhookSecret("s1", "c1", "k1", "sealed-bytes", T0, expires_at)


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def test_a_new_secret_is_whsec_and_32_random_bytes() -> None:
    issued = {new_signing_secret() for _ in range(20)}
    assert len(issued) == 20
    for text in issued:
        assert text.startswith("whsec_")
        assert len(base64.b64decode(text.removeprefix("whsec_"), validate=True)) == 32
        assert is_signing_secret(text)


def test_a_secret_needs_the_prefix() -> None:
    assert not is_signing_secret(b64(b"k" * 32))
    assert not is_signing_secret("whsk_" + b64(b"k" * 32))


def test_a_secret_holds_at_least_192_bits() -> None:
    assert is_signing_secret("whsec_" + b64(b"k" * 24))
    assert not is_signing_secret("whsec_" + b64(b"k" * 23))


def test_a_secret_must_be_strict_base64() -> None:
    assert not is_signing_secret("whsec_" + b64(b"k" * 32) + "!!!!")
    assert not is_signing_secret("whsec_" + b64(b"k" * 32)[:-1])
    assert not is_signing_secret("whsec_é")


def test_a_sealed_secret_is_bound_to_its_client_and_id() -> None:
    assert sealing_context("c1", "s1") == b"gradeq-webhook-secret\nc1\ns1"


def test_a_secret_id_is_12_hex_characters() -> None:
    ids = {WebhookSecret.new_id() for _ in range(20)}
    assert len(ids) == 20
    for secret_id in ids:
        assert len(secret_id) == 12
        int(secret_id, 16)


def test_a_secret_signs_until_its_expiry_and_not_from_it() -> None:
    assert secret().signs_at(T0 + timedelta(days=3650))
    expiring = secret(T0 + timedelta(hours=1))
    assert expiring.signs_at(T0)
    assert expiring.signs_at(T0 + timedelta(minutes=59))
    assert not expiring.signs_at(T0 + timedelta(hours=1))
    assert not expiring.signs_at(T0 + timedelta(hours=2))


def test_expiring_sets_an_expiry_and_never_extends_one() -> None:
    later, earlier = T0 + timedelta(hours=2), T0 + timedelta(hours=1)
    assert secret().expire(later).expires_at == later
    assert secret(earlier).expire(later).expires_at == earlier
    assert secret(later).expire(earlier).expires_at == earlier
    assert secret(earlier).expire(earlier).expires_at == earlier


def test_a_secret_round_trips_through_its_record() -> None:
    expiring = secret(T0 + timedelta(hours=1))
    record = expiring.to_record()
    assert record == {
        "secret_id": "s1",
        "client_id": "c1",
        "key_id": "k1",
        "sealed": "sealed-bytes",
        "created_at": T0,
        "expires_at": T0 + timedelta(hours=1),
    }
    assert WebhookSecret.from_record(record) == expiring
    record.pop("expires_at")
    assert WebhookSecret.from_record(record) == secret()


def test_the_public_view_shows_everything_but_the_sealed_secret() -> None:
    assert secret(T0 + timedelta(hours=1)).public_view() == {
        "secret_id": "s1",
        "client_id": "c1",
        "created_at": "2026-12-02T09:00:00+00:00",
        "expires_at": "2026-12-02T10:00:00+00:00",
    }
    assert secret().public_view()["expires_at"] is None
