"""Authenticate callers: server clients by API key, web frontends by Firebase ID token.

Either way the caller becomes one scope, and every job belongs to it: a key's client, or
for a signed-in user the scope the server decides (see `FirebaseAuthenticator`).
"""

from __future__ import annotations

from flask import request

from services.intake.auth.failures import FailedAuthLimiter
from services.intake.auth.firebase import FirebaseAuthenticator
from shared.domain.api_keys import PREFIX, key_id_of
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
    ) -> None:
        self._api_keys = api_keys
        self._firebase = firebase
        self._failures = failures

    def client_id(self) -> str:
        """The caller's scope; 429 for a credential past its failed authentications."""
        if self._failures is None:
            return self._authenticate()
        return self._failures.guard("client", self._authenticate, self._attributable)

    def _attributable(self, credential: str) -> bool:
        """A well-formed key or an ID token: its failures are its own, not its address's."""
        if key_id_of(credential) is not None:
            return True
        return self._firebase is not None and credential.count(".") == 2

    def _authenticate(self) -> str:
        credential = bearer_credential()
        if credential.startswith(PREFIX):
            return self._api_keys.client_for(credential)
        if self._firebase is not None and credential.count(".") == 2:
            only_own = request.headers.get(SCOPE_HEADER, "").strip().lower() == "user"
            return self._firebase.client_for(credential, only_own)
        raise Unauthenticated("unknown credential")
