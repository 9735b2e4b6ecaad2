"""What an anonymous caller can cost: unknown keys are remembered, failures are limited."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, TypedDict

import pytest
from flask import Flask
from flask.testing import FlaskClient
from pydantic import SecretStr

from services.intake.app import create_app
from shared.adapters.embedded.api_key_store import SqliteApiKeyStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.api_keys import ApiKey
from shared.http.client_keys import UnknownKeyIds
from shared.http.failed_auth import client_address
from tests.unit.conftest import API_KEY
from tests.unit.test_intake_api import assert_problem, post


class CountingKeys(SqliteApiKeyStore):
    """The SQLite key store, counting the reads a Firestore one would be billed for."""

    reads = 0

    def get(self, key_id: str) -> ApiKey | None:
        self.reads += 1
        return super().get(key_id)


@pytest.fixture
def keys(settings: Settings) -> CountingKeys:
    return CountingKeys(SqliteDatabase(settings.database_path))


def app_with(
    settings: Settings, adapters: Adapters, clock: FrozenClock, keys: CountingKeys, **tuned: Any
) -> FlaskClient:
    changed = settings.model_copy(update=tuned)
    return create_app(changed, adapters, clock, api_keys=keys).test_client()


def unknown(n: int) -> str:
    return f"gq_nosuch{n}_" + "s" * 43


def test_an_unknown_key_costs_one_store_read_per_ttl(
    settings: Settings, adapters: Adapters, clock: FrozenClock, keys: CountingKeys
) -> None:
    client = app_with(settings, adapters, clock, keys, auth_failure_burst=100)
    for _ in range(5):
        assert_problem(post(client, api_key=unknown(1)), 401, "unauthenticated")
    assert keys.reads == 1
    clock.advance(timedelta(seconds=61))
    assert_problem(post(client, api_key=unknown(1)), 401, "unauthenticated")
    assert keys.reads == 2
    # Known keys are read every time: revocation still takes effect at once.
    for n in range(3):
        assert post(client, key=f"k-{n}").status_code == 202
    assert keys.reads == 5


def test_the_unknown_key_memory_is_bounded_and_expires(clock: FrozenClock) -> None:
    remembered = UnknownKeyIds(ttl_s=10, max_size=3, clock=clock)
    for n in range(10):
        remembered.add(f"id{n}")
    assert len(remembered) == 3
    assert "id9" in remembered and "id0" not in remembered
    clock.advance(timedelta(seconds=10))
    assert "id9" not in remembered


class FromAddress(TypedDict):
    """The test client's keyword that sets the caller's address."""

    environ_base: dict[str, str]


NAT: FromAddress = {"environ_base": {"REMOTE_ADDR": "203.0.113.7"}}


def wrong_secret(n: int) -> str:
    """Client A's key id with a secret that is not its key's."""
    return f"gq_clienta_{n:043d}"


def test_a_credential_past_its_failures_is_429_with_retry_after_before_any_lookup(
    settings: Settings, adapters: Adapters, clock: FrozenClock, keys: CountingKeys
) -> None:
    client = app_with(
        settings, adapters, clock, keys, auth_failure_burst=3, auth_failure_rate_per_s=0.1
    )
    for _ in range(3):
        assert_problem(post(client, api_key=wrong_secret(1), **NAT), 401, "unauthenticated")
    assert keys.reads == 3
    refused = post(client, api_key=wrong_secret(1), **NAT)
    assert_problem(refused, 429, "too-many-failed-authentications")
    assert refused.headers["Retry-After"] == "10"
    assert keys.reads == 3  # the refused attempt looked nothing up
    # The valid key, though it shares the key id and the address, is not that credential.
    assert post(client, key="k-1", **NAT).status_code == 202
    clock.advance(timedelta(seconds=10))
    assert_problem(post(client, api_key=wrong_secret(1), **NAT), 401, "unauthenticated")


def test_a_valid_key_passes_from_an_address_where_others_keep_failing(
    settings: Settings, adapters: Adapters, clock: FrozenClock, keys: CountingKeys
) -> None:
    """A school behind one NAT address: twenty bad keys, then one bad try every 5 s."""
    client = app_with(settings, adapters, clock, keys)  # the defaults: 20, then one per 5 s
    for n in range(20):
        assert_problem(post(client, api_key=unknown(n), **NAT), 401, "unauthenticated")
        assert_problem(post(client, api_key=wrong_secret(n), **NAT), 401, "unauthenticated")
    for n in range(5):
        clock.advance(timedelta(seconds=5))
        post(client, api_key=unknown(n), **NAT)
        assert post(client, key=f"valid-{n}", **NAT).status_code == 202


def test_unattributable_failures_count_against_the_address_and_only_refuse_more_of_them(
    settings: Settings, adapters: Adapters, clock: FrozenClock, keys: CountingKeys
) -> None:
    client = app_with(
        settings, adapters, clock, keys, auth_failure_burst=3, auth_failure_rate_per_s=0.1
    )
    malformed = [f"not-a-key-{n}" for n in range(3)]
    for credential in malformed:
        assert_problem(post(client, api_key=credential, **NAT), 401, "unauthenticated")
    refused = post(client, api_key="still-not-a-key", **NAT)
    assert_problem(refused, 429, "too-many-failed-authentications")
    assert refused.headers["Retry-After"] == "10"
    no_header = client.post("/v1/grading-jobs", json={}, **NAT)
    assert_problem(no_header, 429, "too-many-failed-authentications")
    # A valid key from that address is never asked about the address at all.
    assert post(client, key="k-1", **NAT).status_code == 202
    elsewhere: FromAddress = {"environ_base": {"REMOTE_ADDR": "198.51.100.2"}}
    assert_problem(post(client, api_key="not-a-key", **elsewhere), 401, "unauthenticated")
    assert keys.reads == 1  # the valid key's; nothing malformed was looked up


def _address_of(headers: dict[str, str], hops: int) -> str:
    app = Flask(__name__)
    with app.test_request_context(headers=headers, environ_base={"REMOTE_ADDR": "10.0.0.1"}):
        return client_address(hops)


def test_the_address_is_the_entry_the_trusted_proxies_appended() -> None:
    # The caller writes what it likes on the left; Cloud Run's front appends the peer.
    forwarded = {"X-Forwarded-For": "1.1.1.1, 2.2.2.2, 203.0.113.7"}
    assert _address_of(forwarded, 0) == "10.0.0.1"
    assert _address_of(forwarded, 1) == "203.0.113.7"
    assert _address_of(forwarded, 2) == "2.2.2.2"
    assert _address_of({}, 1) == "10.0.0.1"


def test_a_valid_key_is_not_counted_as_a_failure(
    settings: Settings, adapters: Adapters, clock: FrozenClock, keys: CountingKeys
) -> None:
    client = app_with(settings, adapters, clock, keys, auth_failure_burst=1)
    for n in range(5):
        assert post(client, key=f"k-{n}", api_key=API_KEY).status_code == 202


REVIEWER_KEY = "reviewer-a-secret"
OPERATOR_KEY = "operator-secret"


@pytest.mark.parametrize(
    ("path", "status", "slug", "valid"),
    [
        ("/v1/reviews", 401, "unauthenticated", REVIEWER_KEY),
        ("/admin/v1/jobs", 403, "operator-credential-required", OPERATOR_KEY),
    ],
)
def test_reviewer_and_operator_credentials_are_throttled_after_their_failures(
    settings: Settings,
    adapters: Adapters,
    clock: FrozenClock,
    keys: CountingKeys,
    path: str,
    status: int,
    slug: str,
    valid: str,
) -> None:
    client = app_with(
        settings,
        adapters,
        clock,
        keys,
        reviewer_keys=SecretStr(f"client-a/ms-smith={REVIEWER_KEY}"),
        operator_keys=SecretStr(f"alice={OPERATOR_KEY}"),
    )

    def call(credential: str) -> Any:
        return client.get(path, headers={"Authorization": f"Bearer {credential}"}, **NAT)

    statuses = [call("a-guess").status_code for _ in range(40)]
    assert statuses == [status] * 20 + [429] * 20
    assert_problem(call("a-guess"), 429, "too-many-failed-authentications")
    assert_problem(call("another-guess"), status, slug)
    # The valid credential from the same address is not the one that failed.
    assert call(valid).status_code == 200
    # Nor is a client's key on the client routes, though it fails here.
    for _ in range(25):
        call(API_KEY)
    assert post(client, key="k-1", **NAT).status_code == 202
