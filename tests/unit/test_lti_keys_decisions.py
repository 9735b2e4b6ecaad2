"""Gradeq's LTI keys' decisions: a second rotation retires every key still published, the
ones an earlier rotation already set to expire included; a key sealed to its kid, opened
again by another process."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from services.notification.sealing import Sealer, SecretUnreadable, new_sealing_key
from shared.adapters.embedded.lti_store import SqliteLtiStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.clock import FrozenClock
from shared.domain.lti import ToolKey, tool_key_context
from shared.service_layer.lti_keys import LtiToolKeys

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_a_second_rotation_brings_forward_the_expiry_of_every_published_key(
    tmp_path: Path,
) -> None:
    clock = FrozenClock(T0)
    store = SqliteLtiStore(SqliteDatabase(tmp_path / "lti.sqlite3"))
    keys = LtiToolKeys(store, Sealer.from_setting(new_sealing_key()), clock)
    first = keys.ensure()
    second = keys.rotate(lead=timedelta(hours=1), overlap=timedelta(hours=2))
    third = keys.rotate(lead=timedelta(minutes=30), overlap=timedelta(minutes=30))
    expiries = {k.kid: k.expires_at for k in store.tool_keys()}
    assert expiries == {
        first.kid: T0 + timedelta(hours=1),
        second.kid: T0 + timedelta(hours=1),
        third.kid: None,
    }
    assert third.signs_from == T0 + timedelta(minutes=30)


def test_a_rotation_leaves_a_key_that_has_expired_as_it_was(tmp_path: Path) -> None:
    clock = FrozenClock(T0)
    store = SqliteLtiStore(SqliteDatabase(tmp_path / "lti.sqlite3"))
    keys = LtiToolKeys(store, Sealer.from_setting(new_sealing_key()), clock)
    first = keys.ensure()
    second = keys.rotate(lead=timedelta(hours=1), overlap=timedelta(hours=1))
    clock.advance(timedelta(hours=3))
    third = keys.rotate(lead=timedelta(hours=1), overlap=timedelta(hours=1))
    expiries = {k.kid: k.expires_at for k in store.tool_keys()}
    assert expiries == {
        first.kid: T0 + timedelta(hours=2),
        second.kid: T0 + timedelta(hours=5),
        third.kid: None,
    }


def test_another_process_opens_the_sealed_key_bound_to_its_kid(tmp_path: Path) -> None:
    clock = FrozenClock(T0)
    store = SqliteLtiStore(SqliteDatabase(tmp_path / "lti.sqlite3"))
    sealer = Sealer.from_setting(new_sealing_key())
    made = LtiToolKeys(store, sealer, clock).signing_key()
    opened = LtiToolKeys(store, sealer, clock).signing_key()
    assert opened.kid == made.kid
    assert opened.private_key.private_numbers() == made.private_key.private_numbers()
    [key] = store.tool_keys()
    moved = dataclasses.replace(key, kid="other-kid")
    with pytest.raises(SecretUnreadable):
        sealer.open(moved.sealing_key_id, moved.sealed, tool_key_context(moved.kid))


class CountingSealer:
    """The sealer, counting how often a sealed key is opened."""

    def __init__(self, sealer: Sealer) -> None:
        self.sealer = sealer
        self.opened = 0

    def seal(self, plaintext: str, context: bytes) -> tuple[str, str]:
        return self.sealer.seal(plaintext, context)

    def open(self, key_id: str, sealed: str, context: bytes) -> str:
        self.opened += 1
        return self.sealer.open(key_id, sealed, context)


def test_a_key_is_published_for_signatures_and_opened_once_per_process(tmp_path: Path) -> None:
    store = SqliteLtiStore(SqliteDatabase(tmp_path / "lti.sqlite3"))
    sealer = CountingSealer(Sealer.from_setting(new_sealing_key()))
    keys = LtiToolKeys(store, sealer, FrozenClock(T0))
    made = keys.signing_key()
    keys.signing_key()
    assert sealer.opened == 0
    [jwk] = keys.jwks()["keys"]
    assert (jwk["kid"], jwk["alg"], jwk["use"]) == (made.kid, "RS256", "sig")
    again = LtiToolKeys(store, sealer, FrozenClock(T0))
    again.signing_key()
    again.signing_key()
    assert sealer.opened == 1


def test_a_sealed_key_that_is_not_rsa_is_refused(tmp_path: Path) -> None:
    store = SqliteLtiStore(SqliteDatabase(tmp_path / "lti.sqlite3"))
    sealer = Sealer.from_setting(new_sealing_key())
    pem = (
        ec.generate_private_key(ec.SECP256R1())
        .private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        .decode()
    )
    sealing_key_id, sealed = sealer.seal(pem, tool_key_context("ec-kid"))
    store.add_key(ToolKey("ec-kid", sealing_key_id, sealed, {"kid": "ec-kid"}, T0, T0))
    with pytest.raises(ValueError) as refused:
        LtiToolKeys(store, sealer, FrozenClock(T0)).signing_key()
    assert str(refused.value) == "LTI signing key ec-kid is not an RSA key"
