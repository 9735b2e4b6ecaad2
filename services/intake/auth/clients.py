"""Authenticate callers: school servers by API key, web frontends by Firebase ID token or
an LTI launch's session token, reviewers by reviewer key.

Whatever the credential, the caller becomes one `Principal` (school, author, role); what
it may then do is the one policy's decision (shared/domain/authorization.py).
"""

from __future__ import annotations

from flask import g, request

from services.intake.auth.firebase import FirebaseAuthenticator
from services.intake.auth.reviewers import ReviewerKeys
from shared.domain.api_keys import PREFIX, key_id_of
from shared.domain.authorization import SERVER, Principal, Role
from shared.http.client_keys import ApiKeyAuthenticator, bearer_credential
from shared.http.errors import Unauthenticated
from shared.http.failed_auth import FailedAuthLimiter
from shared.service_layer.lti_launch import LtiLaunches

#: A member of staff signed in may send this header (value "user") to list only their own
#: objects. It only ever narrows: nothing widens what the role allows.
SCOPE_HEADER = "Gradeq-Scope"


class ClientAuthenticator:
    """Read `Authorization: Bearer ...` and answer who the caller is."""

    def __init__(
        self,
        api_keys: ApiKeyAuthenticator,
        firebase: FirebaseAuthenticator | None = None,
        failures: FailedAuthLimiter | None = None,
        reviewer_keys: ReviewerKeys | None = None,
        lti: LtiLaunches | None = None,
    ) -> None:
        self._api_keys = api_keys
        self._firebase = firebase
        self._failures = failures
        self._reviewer_keys = reviewer_keys or ReviewerKeys({})
        self._lti = lti

    def principal(self) -> Principal:
        """The caller (once per request); 429 for a credential past its failed
        authentications."""
        known: Principal | None = g.get("gradeq_principal")
        if known is not None:
            return known
        if self._failures is None:
            found = self._authenticate()
        else:
            found = self._failures.guard("client", self._authenticate, self._attributable)
        g.gradeq_principal = found
        return found

    def _attributable(self, credential: str) -> bool:
        """A well-formed key, an ID token, or (where reviewer keys are configured, whose
        form is free) any credential: its failures are its own, not its address's."""
        if key_id_of(credential) is not None or self._reviewer_keys:
            return True
        signed_in = self._firebase is not None or self._lti is not None
        return signed_in and credential.count(".") == 2

    def _authenticate(self) -> Principal:
        credential = bearer_credential()
        if credential.startswith(PREFIX):
            return Principal(self._api_keys.client_for(credential), SERVER, Role.SERVER)
        if self._lti is not None and credential.count(".") == 2:
            launched = self._lti.principal_for(credential)  # an LTI launch's session
            if launched is not None:
                return launched
        if self._firebase is not None and credential.count(".") == 2:
            only_own = request.headers.get(SCOPE_HEADER, "").strip().lower() == "user"
            return self._firebase.principal_for(credential, only_own)
        reviewer = self._reviewer_keys.match(credential)
        if reviewer is not None:
            school, name = reviewer
            return Principal(school, f"key:{name}", Role.REVIEWER)
        raise Unauthenticated("unknown credential")
