"""LTI 1.3 Advantage, tool side: what Gradeq stores about each school's platform and its
own signing keys, and how a launch's roles map to the one authorization policy.

A `LtiRegistration` is what a school's LMS admin and Gradeq's operator exchange when they
register Gradeq as an LTI 1.3 tool: the platform's issuer, the client id the platform gave
Gradeq, the deployment ids, and the platform's endpoints (OIDC authorization, OAuth 2 token,
JWKS). Nothing in it is secret: the platform proves itself with keys it publishes.

Gradeq proves itself with its own RSA keys (`ToolKey`): it signs the client assertions of
the client-credentials grant and the login state with them, and publishes the public halves
as its JWKS. The private key is stored only sealed (AES-256-GCM under a key-encryption
key, bound to the key id, like the webhook secrets), never logged, and rotated: a new key
is published before it signs, and the old one stays published until every token it signed
has expired.
"""

from __future__ import annotations

import dataclasses
import hashlib
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from shared.domain.authorization import Role
from shared.domain.errors import GradeqError

LTI_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"
AGS_CLAIM = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
NRPS_CLAIM = "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice"
SCOPE_LINEITEM = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"
SCOPE_SCORE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
SCOPE_NRPS = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"

_MEMBERSHIP = "http://purl.imsglobal.org/vocab/lis/v2/membership#"
_SUB_ROLE = "http://purl.imsglobal.org/vocab/lis/v2/membership/"
_INSTITUTION = "http://purl.imsglobal.org/vocab/lis/v2/institution/person#"
_SYSTEM = "http://purl.imsglobal.org/vocab/lis/v2/system/person#"


class LtiRegistrationNotFound(GradeqError):
    slug = "lti-registration-not-found"
    title = "No LTI registration for this platform and client id"
    status = 404


class ToolKeyNotFound(GradeqError):
    slug = "lti-tool-key-not-found"
    title = "No such LTI signing key"
    status = 404


@dataclass(frozen=True)
class LtiRegistration:
    """One school's LTI 1.3 platform, as registered."""

    school: str
    issuer: str
    client_id: str
    deployment_ids: tuple[str, ...]
    #: The platform's OIDC authorization endpoint (where login initiation redirects).
    auth_login_url: str
    #: The platform's OAuth 2 token endpoint (client-credentials grant).
    auth_token_url: str
    #: The platform's JWKS URL (keys that sign its id_tokens).
    key_set_url: str
    #: The `aud` the token endpoint expects in client assertions, where it is not the
    #: token URL itself (Moodle and Canvas take the token URL).
    token_audience: str | None = None

    def __post_init__(self) -> None:
        for name in ("school", "issuer", "client_id", "auth_login_url", "auth_token_url"):
            if not str(getattr(self, name)).strip():
                raise ValueError(f"an LTI registration needs {name}")
        if not self.key_set_url.strip():
            raise ValueError("an LTI registration needs key_set_url")
        if not self.deployment_ids:
            raise ValueError("an LTI registration needs at least one deployment id")

    @property
    def registration_id(self) -> str:
        """Where it is stored: one per (issuer, client id)."""
        return registration_id(self.issuer, self.client_id)

    @property
    def assertion_audience(self) -> str:
        return self.token_audience or self.auth_token_url

    def to_record(self) -> dict[str, Any]:
        record = dataclasses.asdict(self)
        record["deployment_ids"] = list(self.deployment_ids)
        return record

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> LtiRegistration:
        return cls(
            school=record["school"],
            issuer=record["issuer"],
            client_id=record["client_id"],
            deployment_ids=tuple(record["deployment_ids"]),
            auth_login_url=record["auth_login_url"],
            auth_token_url=record["auth_token_url"],
            key_set_url=record["key_set_url"],
            token_audience=record.get("token_audience"),
        )


def registration_id(issuer: str, client_id: str) -> str:
    return hashlib.sha256(f"{issuer}\n{client_id}".encode()).hexdigest()[:32]


def tool_key_context(kid: str) -> bytes:
    """What a sealed tool key is bound to, so a record cannot be moved to another kid."""
    return f"gradeq-lti-tool-key\n{kid}".encode()


@dataclass(frozen=True)
class ToolKey:
    """One of Gradeq's LTI signing keys as stored: the private key sealed, the public
    half as a JWK, when it starts signing and when it stops being published."""

    kid: str
    #: The id of the key-encryption key that sealed it.
    sealing_key_id: str
    sealed: str
    public_jwk: dict[str, str]
    created_at: datetime
    signs_from: datetime
    expires_at: datetime | None = None

    @staticmethod
    def new_kid() -> str:
        return secrets.token_hex(8)

    def published_at(self, now: datetime) -> bool:
        """Whether the JWKS lists it at `now` (from creation until it expires)."""
        return self.expires_at is None or now < self.expires_at

    def signs_at(self, now: datetime) -> bool:
        return self.signs_from <= now and self.published_at(now)

    def expire(self, at: datetime) -> ToolKey:
        """The key published until `at` (an earlier expiry stays)."""
        if self.expires_at is not None and self.expires_at <= at:
            return self
        return dataclasses.replace(self, expires_at=at)

    def to_record(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> ToolKey:
        return cls(
            kid=record["kid"],
            sealing_key_id=record["sealing_key_id"],
            sealed=record["sealed"],
            public_jwk=dict(record["public_jwk"]),
            created_at=record["created_at"],
            signs_from=record["signs_from"],
            expires_at=record.get("expires_at"),
        )

    def public_view(self) -> dict[str, Any]:
        """What an operator's listing shows: everything but the sealed key."""
        return {
            "kid": self.kid,
            "created_at": self.created_at.isoformat(),
            "signs_from": self.signs_from.isoformat(),
            "expires_at": self.expires_at.isoformat() if self.expires_at else None,
        }


@dataclass(frozen=True)
class AssignmentLink:
    """Where a Gradeq assignment lives in a school's LMS, as its launches tell: the
    platform (registration), the course (context) and its AGS and NRPS endpoints. The
    line item is the one the LMS linked to the resource link, or the one Gradeq created
    (by the assignment id as `resourceId`) once known."""

    school: str
    assignment_id: str
    issuer: str
    client_id: str
    context_id: str
    lineitems_url: str
    memberships_url: str | None = None
    lineitem_url: str | None = None

    def to_record(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> AssignmentLink:
        return cls(
            school=record["school"],
            assignment_id=record["assignment_id"],
            issuer=record["issuer"],
            client_id=record["client_id"],
            context_id=record["context_id"],
            lineitems_url=record["lineitems_url"],
            memberships_url=record.get("memberships_url"),
            lineitem_url=record.get("lineitem_url"),
        )

    def with_line_item(self, url: str) -> AssignmentLink:
        return dataclasses.replace(self, lineitem_url=url)


def link_id(school: str, assignment_id: str) -> str:
    return hashlib.sha256(f"{school}\n{assignment_id}".encode()).hexdigest()[:32]


def role_of(lti_roles: Iterable[str]) -> Role | None:
    """The policy's role for a launch's roles claim, or None (no role Gradeq serves).

    Context roles come first: Instructor -> teacher (a teaching assistant's Instructor
    sub-role -> reviewer), Learner -> student. An institution or system administrator
    with no context role is staff too. Simple names ("Instructor") are read as the
    context role of that name, as LTI 1.3 Core allows for context roles.
    """
    roles = set()
    for role in lti_roles:
        if role.startswith(_MEMBERSHIP):
            roles.add(role.removeprefix(_MEMBERSHIP))
        elif role.startswith(_SUB_ROLE):
            roles.add(role.removeprefix(_SUB_ROLE))
        elif "/" not in role and ":" not in role:
            roles.add(role)
        elif role in (_INSTITUTION + "Administrator", _SYSTEM + "Administrator"):
            roles.add("Administrator")
    if "Instructor#TeachingAssistant" in roles and "Administrator" not in roles:
        return Role.REVIEWER
    if roles & {"Instructor", "Administrator", "ContentDeveloper"}:
        return Role.TEACHER
    if "Learner" in roles:
        return Role.STUDENT
    return None


def student_id_of(user_id: str, lis_person_sourcedid: str | None) -> str:
    """The Gradeq student id of an LMS user: the school's roster id (the SIS id the LMS
    calls lis_person_sourcedid) where the LMS sends one, else the LMS user id."""
    return lis_person_sourcedid.strip() if lis_person_sourcedid else user_id
