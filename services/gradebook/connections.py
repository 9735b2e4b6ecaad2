"""Each school's gradebook connection, read from GRADEQ_GRADEBOOK_CONNECTIONS_FILE (or
the same JSON in GRADEQ_GRADEBOOK_CONNECTIONS_JSON).

The file maps a school to its connection: `{"school-a": {"kind": "classroom", ...,
"roster": {"<student id>": "<LMS user id>"}}}` (docs/gradebook.md lists each kind's
fields). It holds no secret: credentials come from the runtime's own identity.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from services.gradebook.ports import GradebookWriter
from services.gradebook.settings import GradebookSettings
from shared.ports import LtiStore

if TYPE_CHECKING:
    from services.gradebook.claims import ItemClaims

#: kind -> build the writer from the school's entry.
WriterFactory = Callable[[str, Mapping[str, Any], GradebookSettings], GradebookWriter]


@dataclass
class StaticConnections:
    """Writers and rosters fixed at start."""

    writers: dict[str, GradebookWriter] = field(default_factory=dict)
    rosters: dict[str, dict[str, str]] = field(default_factory=dict)
    #: Schools whose students' LMS user id is their Gradeq student id (no roster).
    identity_roster: frozenset[str] = frozenset()

    def writer(self, school: str) -> GradebookWriter | None:
        return self.writers.get(school)

    def lms_user_id(self, school: str, student_id: str) -> str | None:
        if school in self.identity_roster:
            return student_id
        return self.rosters.get(school, {}).get(student_id)


def _factories(claims: ItemClaims | None) -> dict[str, WriterFactory]:
    from services.gradebook.classroom import classroom_writer

    return {"classroom": functools.partial(classroom_writer, claims=claims)}


def load_connections(
    settings: GradebookSettings,
    factories: Mapping[str, WriterFactory] | None = None,
    claims: ItemClaims | None = None,
) -> StaticConnections:
    """Read the connections file (none: no school has a gradebook); ValueError when an
    entry is malformed or names an unknown kind, so a bad file never starts a service.
    `claims`: where the instances agree on the Classroom course work they create."""
    if settings.connections_file is not None:
        raw = json.loads(settings.connections_file.read_text())
    elif settings.connections_json.strip():
        raw = json.loads(settings.connections_json)
    else:
        return StaticConnections()
    if not isinstance(raw, dict):
        raise ValueError("the gradebook connections file must hold a JSON object")
    factories = _factories(claims) if factories is None else factories
    connections = StaticConnections()
    identity: set[str] = set()
    for school, entry in raw.items():
        if not isinstance(entry, dict) or entry.get("kind") not in factories:
            raise ValueError(
                f"school {school!r}: 'kind' must be one of {', '.join(sorted(factories))}"
            )
        connections.writers[school] = factories[entry["kind"]](school, entry, settings)
        roster = entry.get("roster")
        if roster == "student_id":
            identity.add(school)
        elif isinstance(roster, dict):
            connections.rosters[school] = {str(k): str(v) for k, v in roster.items()}
        elif roster is not None:
            raise ValueError(f"school {school!r}: 'roster' must be an object or \"student_id\"")
    connections.identity_roster = frozenset(identity)
    return connections


@dataclass
class LmsConnections:
    """The connections file first, then the school's LTI 1.3 registrations: a school
    registered as an LTI platform gets the LTI writer (which finds its students in the
    platform's roster itself)."""

    configured: StaticConnections
    lti: LtiStore
    lti_writer: GradebookWriter

    def writer(self, school: str) -> GradebookWriter | None:
        found = self.configured.writer(school)
        if found is not None:
            return found
        return self.lti_writer if self.lti.registrations(school) else None

    def lms_user_id(self, school: str, student_id: str) -> str | None:
        return self.configured.lms_user_id(school, student_id)
