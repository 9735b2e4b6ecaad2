"""Whose failure a refused credential is: a token-shaped one is its own only where tokens
are signed in (Firebase or LTI); otherwise its failures count against its address."""

from __future__ import annotations

from typing import Any, cast

from services.intake.auth.clients import ClientAuthenticator
from shared.clock import FrozenClock
from shared.http.client_keys import ApiKeyAuthenticator

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
