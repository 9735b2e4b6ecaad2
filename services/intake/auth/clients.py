"""Authenticate callers: server clients by API key, web frontends by Firebase ID token.

Either way the caller becomes one scope, and every job belongs to it: a key's client, or
for a signed-in user the scope the server decides (see `FirebaseAuthenticator`).
"""

from __future__ import annotations

from collections.abc import Callable

from flask import request

from services.intake.auth.failures import FailedAuthLimiter, client_address
from services.intake.auth.firebase import FirebaseAuthenticator
from shared.domain.api_keys import PREFIX
from shared.http.client_keys import ApiKeyAuthenticator, bearer_credential
from shared.http.errors import Unauthenticated

#: A client-wide signed-in user may send this header (value "user") to see only their own
#: jobs. It only ever narrows: without it a user still gets no more than the server grants.
SCOPE_HEADER = "Gradeq-Scope"


class ClientAuthenticator:
    """Read `Authorization: Bearer ...` and answer the caller's client id."""

    def __init__(
        self,
        api_keys: ApiKeyAuthenticator,
        firebase: FirebaseAuthenticator | None = None,
        failures: FailedAuthLimiter | None = None,
        address: Callable[[], str] = lambda: client_address(0),
    ) -> None:
        self._api_keys = api_keys
        self._firebase = firebase
        self._failures = failures
        self._address = address

    def client_id(self) -> str:
        """The caller's scope; 429 first for an address past its failed authentications."""
        if self._failures is None:
            return self._authenticate()
        address = self._address()
        self._failures.check(address)
        try:
            return self._authenticate()
        except Unauthenticated:
            self._failures.failed(address)
            raise

    def _authenticate(self) -> str:
        credential = bearer_credential()
        if credential.startswith(PREFIX):
            return self._api_keys.client_for(credential)
        if self._firebase is not None and credential.count(".") == 2:
            only_own = request.headers.get(SCOPE_HEADER, "").strip().lower() == "user"
            return self._firebase.client_for(credential, only_own)
        raise Unauthenticated("unknown credential")
