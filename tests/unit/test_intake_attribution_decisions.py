"""Whose failure a refused credential is: a token-shaped one is its own only where tokens
are signed in (Firebase or LTI); otherwise its failures count against its address. And the
caller is authenticated once per request, with or without a limit on failures."""

from __future__ import annotations

from typing import Any, cast

import pytest
from flask import Flask

from services.intake.auth.clients import ClientAuthenticator
from shared.clock import FrozenClock
from shared.domain.api_keys import ApiKey
from shared.domain.authorization import SERVER, Principal, Role
from shared.http.client_keys import ApiKeyAuthenticator
from shared.http.errors import Unauthenticated
from tests.support.key_store import RecordingKeys

TOKEN = "header.payload.signature"


def test_a_token_shaped_credential_is_its_own_only_where_tokens_are_signed_in(
    clock: FrozenClock,
) -> None:
    keys = ApiKeyAuthenticator(cast(Any, None), clock)
    signs_in = cast(Any, object())  # only whether one is configured is read
    assert not ClientAuthenticator(keys)._attributable(TOKEN)
    assert ClientAuthenticator(keys, lti=signs_in)._attributable(TOKEN)
    assert ClientAuthenticator(keys, firebase=signs_in)._attributable(TOKEN)
    assert not ClientAuthenticator(keys, lti=signs_in)._attributable("not-a-token")


def test_the_caller_is_authenticated_once_per_request_without_a_failure_limit(
    clock: FrozenClock,
) -> None:
    key, stored = ApiKey.issue("school-a", clock.now(), key_id="k1")
    keys = RecordingKeys(stored)
    authenticator = ClientAuthenticator(ApiKeyAuthenticator(cast(Any, keys), clock))
    caller = Principal("school-a", SERVER, Role.SERVER)
    app = Flask(__name__)
    with app.test_request_context(headers={"Authorization": f"Bearer {key}"}):
        assert authenticator.principal() == caller
        assert authenticator.principal() == caller  # asked again by the same request
    assert keys.reads == ["k1"]
    with app.test_request_context(headers={"Authorization": f"Bearer {key}"}):
        assert authenticator.principal() == caller  # a new request looks the key up again
    assert keys.reads == ["k1", "k1"]


def test_a_credential_no_authenticator_takes_is_refused_as_unknown(clock: FrozenClock) -> None:
    authenticator = ClientAuthenticator(ApiKeyAuthenticator(cast(Any, RecordingKeys()), clock))
    request = Flask(__name__).test_request_context(headers={"Authorization": "Bearer not-a-key"})
    with request, pytest.raises(Unauthenticated) as refused:
        authenticator.principal()
    assert refused.value.detail == "unknown credential"
