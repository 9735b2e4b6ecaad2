"""Authenticate reviewers: a reviewer key (GRADEQ_REVIEWER_KEYS) or a signed-in user whose
role claim holds a reviewer role. Either way the reviewer speaks for one client."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass

from services.intake.auth.failures import FailedAuthLimiter
from services.intake.auth.firebase import FirebaseAuthenticator
from shared.domain.errors import GradeqError
from shared.http.client_keys import bearer_credential
from shared.http.errors import Unauthenticated

_HASHED = "sha256:"


class ReviewerCredentialRequired(GradeqError):
    slug = "reviewer-credential-required"
    title = "This route needs a reviewer credential"
    status = 403


@dataclass(frozen=True)
class Reviewer:
    """Who reviews (as recorded in the job's history) and for which client."""

    client_id: str
    by: str


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


class ReviewerAuthenticator:
    """Map `Authorization: Bearer <credential>` to a reviewer, or refuse with 403."""

    def __init__(
        self,
        keys: Mapping[str, tuple[str, str]],
        firebase: FirebaseAuthenticator | None = None,
        failures: FailedAuthLimiter | None = None,
    ) -> None:
        self._digests = [
            (bytes.fromhex(k.removeprefix(_HASHED)) if k.startswith(_HASHED) else _digest(k), who)
            for k, who in keys.items()
        ]
        self._firebase = firebase
        self._failures = failures

    def reviewer(self) -> Reviewer:
        """The reviewer; 429 for a credential past its failed authentications."""
        if self._failures is None:
            return self._authenticate()
        refused = (Unauthenticated, ReviewerCredentialRequired)
        return self._failures.guard("reviewer", self._authenticate, refused=refused)

    def _authenticate(self) -> Reviewer:
        credential = bearer_credential()
        if self._firebase is not None and credential.count(".") == 2:
            found = self._firebase.reviewer_for(credential)
            if found is None:
                raise ReviewerCredentialRequired("the signed-in user has no reviewer role")
            client, user = found
            return Reviewer(client, f"user:{user}")
        digest = _digest(credential)
        match = None
        for known, who in self._digests:  # every digest compared: constant time overall
            if hmac.compare_digest(known, digest):
                match = who
        if match is None:
            raise ReviewerCredentialRequired("this credential is not a reviewer's")
        client, name = match
        return Reviewer(client, f"key:{name}")
