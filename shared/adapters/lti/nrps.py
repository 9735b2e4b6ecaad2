"""Names and Role Provisioning Services 2.0, tool side: a course's roster, every page
(RFC 8288 `Link: <...>; rel="next"`), and the map from Gradeq student ids to LMS users."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import requests

from shared.adapters.lti.errors import LtiRefused, call
from shared.adapters.lti.tokens import DEFAULT_TIMEOUT_S, LtiTokens
from shared.domain.authorization import Role
from shared.domain.lti import SCOPE_NRPS, LtiRegistration, role_of, student_id_of

MEMBERSHIPS_TYPE = "application/vnd.ims.lti-nrps.v2.membershipcontainer+json"
NRPS_SCOPES = frozenset({SCOPE_NRPS})


@dataclass(frozen=True)
class RosterMember:
    user_id: str
    roles: tuple[str, ...]
    lis_person_sourcedid: str | None
    active: bool

    @property
    def student_id(self) -> str:
        return student_id_of(self.user_id, self.lis_person_sourcedid)


class NrpsClient:
    """A course's roster on one platform."""

    def __init__(
        self,
        tokens: LtiTokens,
        session: requests.Session | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self._tokens = tokens
        self._session = session or requests.Session()
        self._timeout_s = timeout_s

    def roster(self, registration: LtiRegistration, memberships_url: str) -> list[RosterMember]:
        members: list[RosterMember] = []
        following: str | None = memberships_url
        while following:
            answer = self._get(registration, following)
            body = answer.json()
            if not isinstance(body, dict) or not isinstance(body.get("members"), list):
                raise LtiRefused("the roster answer has no members list", answer.status_code)
            for entry in body["members"]:
                members.append(
                    RosterMember(
                        str(entry["user_id"]),
                        tuple(entry.get("roles") or ()),
                        entry.get("lis_person_sourcedid"),
                        entry.get("status", "Active") == "Active",
                    )
                )
            following = answer.links.get("next", {}).get("url")
        return members

    def _get(self, registration: LtiRegistration, url: str) -> requests.Response:
        """GET with a bearer token; a 401 drops the token and tries once with a new one."""
        for attempt in (1, 2):
            token = self._tokens.token(registration, NRPS_SCOPES)
            send = partial(
                self._session.get,
                url,
                headers={"Authorization": f"Bearer {token}", "Accept": MEMBERSHIPS_TYPE},
                timeout=self._timeout_s,
            )
            try:
                return call("roster", send)
            except LtiRefused as exc:
                if exc.status != 401 or attempt == 2:
                    raise
                self._tokens.forget(registration, NRPS_SCOPES)
        raise AssertionError("unreachable")

    def students(self, registration: LtiRegistration, memberships_url: str) -> dict[str, str]:
        """Gradeq student id -> LMS user id, for the course's active learners."""
        return {
            m.student_id: m.user_id
            for m in self.roster(registration, memberships_url)
            if m.active and role_of(m.roles) is Role.STUDENT
        }
