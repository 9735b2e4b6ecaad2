"""Who may read the analytics reports, and whose records they see.

An operator key (GRADEQ_OPERATOR_KEYS) reads every client's records. An API key of a
client listed in GRADEQ_ANALYTICS_READERS reads that client's records only. Any other
credential is refused, and a credential refused too often is answered 429 before it is
looked up again (the same per-credential limits as the intake's, shared/http/failed_auth.py).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from shared.domain.authorization import SERVER, Action, Principal, Role, owner_of
from shared.domain.errors import GradeqError
from shared.http.client_keys import ApiKeyAuthenticator, bearer_credential
from shared.http.errors import Unauthenticated
from shared.http.failed_auth import FailedAuthLimiter

_HASHED = "sha256:"


class NotAReader(GradeqError):
    slug = "not-an-analytics-reader"
    title = "This client may not read analytics"
    status = 403


@dataclass(frozen=True)
class Reader:
    """A reader of the reports: a school's server, or (principal None) an operator's view."""

    principal: Principal | None

    @property
    def client_id(self) -> str | None:
        return self.principal.school if self.principal is not None else None

    def sees(self, record: Mapping[str, Any]) -> bool:
        """Operators see every record; a school what the policy lets it read: its own
        records, its students' included."""
        if self.principal is None:
            return True
        school, author = record.get("client_id"), record.get("author")
        if not isinstance(school, str):
            return False
        owner = owner_of(school, author if isinstance(author, str) else None)
        return self.principal.may(Action.JOB_READ, owner)

    def visible(self, records: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        return [r for r in records if self.sees(r)]


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


class ReaderAuthenticator:
    """Map the request's bearer credential to a Reader, or raise Unauthenticated/NotAReader.

    The API key store is opened on the first client read, so pushes never wait for it.
    """

    def __init__(
        self,
        operator_keys: Mapping[str, str],
        keys: Callable[[], ApiKeyAuthenticator],
        readers: frozenset[str],
        failures: FailedAuthLimiter | None = None,
    ) -> None:
        self._operators = [
            bytes.fromhex(k.removeprefix(_HASHED)) if k.startswith(_HASHED) else _digest(k)
            for k in operator_keys
        ]
        self._keys = cache(keys)
        self._readers = readers
        self._failures = failures

    def reader(self) -> Reader:
        """The reader the request's credential names; its refusals (unknown credential,
        or a client that is not a reader) count against that credential."""
        if self._failures is None:
            return self._authenticate()
        return self._failures.guard(
            "reader", self._authenticate, refused=(Unauthenticated, NotAReader)
        )

    def _authenticate(self) -> Reader:
        credential = bearer_credential()
        digest = _digest(credential)
        # Every digest is compared (constant time), whichever matches.
        if sum(hmac.compare_digest(known, digest) for known in self._operators):
            return Reader(None)
        client_id = self._keys().client_for(credential)
        if client_id not in self._readers:
            raise NotAReader(f"client {client_id} is not in GRADEQ_ANALYTICS_READERS")
        return Reader(Principal(client_id, SERVER, Role.SERVER))
