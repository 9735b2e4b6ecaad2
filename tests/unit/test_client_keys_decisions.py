"""The memory of unknown key ids: nothing is kept without a TTL, any positive TTL keeps,
and a key id added again counts as the newest when the oldest is let go. A credential not
shaped like a key costs no store read."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from flask import Flask

from shared.clock import FrozenClock
from shared.domain.api_keys import ApiKey
from shared.domain.client_ids import USER_SCOPE_MARK
from shared.http.client_keys import ApiKeyAuthenticator, UnknownKeyIds, bearer_credential
from shared.http.errors import Unauthenticated
from tests.support.key_store import RecordingKeys


def test_without_a_ttl_nothing_is_remembered(clock: FrozenClock) -> None:
    remembered = UnknownKeyIds(ttl_s=0, max_size=10, clock=clock)
    remembered.add("id1")
    assert len(remembered) == 0
    assert "id1" not in remembered


def test_a_ttl_of_a_second_or_less_still_remembers_for_that_long(clock: FrozenClock) -> None:
    for ttl_s in (1, 0.5):
        remembered = UnknownKeyIds(ttl_s=ttl_s, max_size=10, clock=clock)
        remembered.add("id1")
        assert len(remembered) == 1
        assert "id1" in remembered
        clock.advance(timedelta(seconds=ttl_s))
        assert "id1" not in remembered


def test_a_key_id_added_again_is_the_newest_and_outlives_older_ones(clock: FrozenClock) -> None:
    remembered = UnknownKeyIds(ttl_s=60, max_size=2, clock=clock)
    remembered.add("id1")
    remembered.add("id2")
    clock.advance(timedelta(seconds=30))
    remembered.add("id1")  # asked for again: remembered afresh
    remembered.add("id3")  # one too many: the oldest, id2, goes
    assert "id1" in remembered and "id3" in remembered
    assert "id2" not in remembered
    clock.advance(timedelta(seconds=59))
    assert "id1" in remembered  # its TTL runs from the second add


def test_only_a_key_id_is_ever_remembered(clock: FrozenClock) -> None:
    remembered = UnknownKeyIds(ttl_s=60, max_size=10, clock=clock)
    remembered.add("id1")
    assert None not in remembered
    assert 1 not in remembered


def test_a_credential_not_shaped_like_a_key_is_refused_without_a_store_read(
    clock: FrozenClock,
) -> None:
    keys = RecordingKeys()
    authenticator = ApiKeyAuthenticator(keys, clock)  # type: ignore[arg-type]

    with pytest.raises(Unauthenticated):
        authenticator.client_for("not-a-key")
    assert keys.reads == []

    with pytest.raises(Unauthenticated):
        authenticator.client_for("gq_abc123_" + "s" * 20)
    assert keys.reads == ["abc123"]


def test_a_made_up_key_costs_one_store_read_a_minute(clock: FrozenClock) -> None:
    keys = RecordingKeys()
    authenticator = ApiKeyAuthenticator(keys, clock)  # type: ignore[arg-type]
    made_up = "gq_abc123_" + "s" * 20
    for seconds in (0, 30, 29.999):  # up to 59.999 s after the first read
        clock.advance(timedelta(seconds=seconds))
        with pytest.raises(Unauthenticated):
            authenticator.client_for(made_up)
    assert keys.reads == ["abc123"]
    clock.advance(timedelta(milliseconds=501))  # a minute and a half second after it
    with pytest.raises(Unauthenticated):
        authenticator.client_for(made_up)
    assert keys.reads == ["abc123", "abc123"]


def test_at_most_ten_thousand_made_up_key_ids_are_remembered(clock: FrozenClock) -> None:
    keys = RecordingKeys()
    authenticator = ApiKeyAuthenticator(keys, clock)  # type: ignore[arg-type]
    key_ids = [f"id{i:05d}" for i in range(10_001)]
    for key_id in [*key_ids, key_ids[-1]]:
        with pytest.raises(Unauthenticated):
            authenticator.client_for(f"gq_{key_id}_" + "s" * 20)
    assert keys.reads == key_ids  # the newest is still remembered
    with pytest.raises(Unauthenticated):
        authenticator.client_for(f"gq_{key_ids[0]}_" + "s" * 20)
    assert keys.reads == [*key_ids, key_ids[0]]  # the oldest was let go for it


def test_every_unusable_key_is_refused_in_the_same_words(clock: FrozenClock) -> None:
    now = clock.now()
    good, kept = ApiKey.issue("school-a", now, key_id="good")
    revoked_key, revoked = ApiKey.issue("school-a", now, key_id="revoked")
    expired_key, expired = ApiKey.issue("school-a", now, now, key_id="expired")
    scoped_key, scoped = ApiKey.issue("school-a", now, key_id="scoped")
    keys = RecordingKeys(
        kept,
        revoked.revoke(now),
        expired,
        dataclasses.replace(scoped, client_id=f"school-a{USER_SCOPE_MARK}ada"),
    )
    authenticator = ApiKeyAuthenticator(keys, clock)  # type: ignore[arg-type]
    assert authenticator.client_for(good) == "school-a"

    unknown = "gq_unknown_" + "s" * 20
    wrong = good.rsplit("_", 1)[0] + "_" + "w" * 20
    details = []
    for key in (unknown, wrong, revoked_key, expired_key, scoped_key):
        with pytest.raises(Unauthenticated) as refused:
            authenticator.client_for(key)
        details.append(refused.value.detail)
    # Nothing to probe: which of them a key is, the answer does not tell.
    assert details == ["unknown, revoked or expired API key"] * 5


@pytest.mark.parametrize("header", ["Bearer tok", "bearer  tok", "BEARER tok "])
def test_the_credential_is_read_after_the_scheme_and_the_spaces_around_it(header: str) -> None:
    # RFC 9110 allows one space or more after the scheme.
    with Flask(__name__).test_request_context(headers={"Authorization": header}):
        assert bearer_credential() == "tok"


@pytest.mark.parametrize("header", [None, "Basic tok", "Bearer", "Bearer  "])
def test_a_request_without_a_bearer_credential_is_told_how_to_send_one(header: str | None) -> None:
    headers = {} if header is None else {"Authorization": header}
    request = Flask(__name__).test_request_context(headers=headers)
    with request, pytest.raises(Unauthenticated) as refused:
        bearer_credential()
    assert refused.value.detail == "send 'Authorization: Bearer <credential>'"
