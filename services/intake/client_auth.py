"""Authenticate callers: server clients by API key, web frontends by Firebase ID token.

Either way the caller becomes one client id, and every job is scoped to it.
"""

from __future__ import annotations

from flask import request

from services.intake.firebase_auth import FirebaseAuthenticator
from shared.domain.api_keys import PREFIX
from shared.http.client_keys import ApiKeyAuthenticator, bearer_credential
from shared.http.errors import Unauthenticated

#: A frontend sends this header (value "user") to scope jobs to the signed-in user.
SCOPE_HEADER = "Gradeq-Scope"


class ClientAuthenticator:
    """Read `Authorization: Bearer ...` and answer the caller's client id."""

    def __init__(
        self, api_keys: ApiKeyAuthenticator, firebase: FirebaseAuthenticator | None = None
    ) -> None:
        self._api_keys = api_keys
        self._firebase = firebase

    def client_id(self) -> str:
        credential = bearer_credential()
        if credential.startswith(PREFIX):
            return self._api_keys.client_for(credential)
        if self._firebase is not None and credential.count(".") == 2:
            per_user = request.headers.get(SCOPE_HEADER, "").strip().lower() == "user"
            return self._firebase.client_for(credential, per_user)
        raise Unauthenticated("unknown credential")
