"""Which lane a job goes through: the request's choice, within what its client may use.

A lane is one queue of shared/config/queues.json. The policy comes from the settings
(GRADEQ_CLIENT_LANES, GRADEQ_DEFAULT_LANE): each listed client may use its lanes, the
first being its default; `*` lists the lanes of every client not named; with no entry
for a client (and no `*`), a client may use every lane.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from shared.domain.errors import LaneNotAllowed, ValidationFailed

#: The key of GRADEQ_CLIENT_LANES that applies to every client not named.
ANY_CLIENT = "*"

#: The lane of the job being graded in this context (the quota limiter and the per-lane
#: grader read it); None outside a grading, or for a job made before lanes.
lane_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("lane", default=None)


@contextmanager
def lane_context(lane: str | None) -> Iterator[None]:
    """Grade inside the block on behalf of `lane`."""
    token = lane_var.set(lane)
    try:
        yield
    finally:
        lane_var.reset(token)


@dataclass(frozen=True)
class LanePolicy:
    """The declared lanes, the default one, and the lanes each client may use."""

    lanes: frozenset[str]
    default: str
    #: client id (or `*`) -> the lanes it may use, its default first.
    clients: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: The lanes ranked above the default one (their jobs skip per-client spacing).
    urgent_lanes: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.default not in self.lanes:
            raise ValueError(f"the default lane {self.default!r} is not declared")
        for client, allowed in self.clients.items():
            unknown = [lane for lane in allowed if lane not in self.lanes]
            if not allowed or unknown:
                raise ValueError(f"client {client!r} lists undeclared lanes {unknown}")

    def urgent(self, lane: str | None) -> bool:
        """Whether the lane ranks above the default one."""
        return lane in self.urgent_lanes

    @classmethod
    def parse(
        cls,
        lanes: Iterable[str],
        default: str,
        text: str,
        urgent_lanes: Iterable[str] = (),
    ) -> LanePolicy:
        """Read 'client=lane|lane,...' (GRADEQ_CLIENT_LANES); ValueError when malformed."""
        clients: dict[str, tuple[str, ...]] = {}
        for pair in (p.strip() for p in text.split(",") if p.strip()):
            client, sep, names = pair.partition("=")
            allowed = tuple(n.strip() for n in names.split("|") if n.strip())
            if not sep or not client.strip() or not allowed:
                raise ValueError("GRADEQ_CLIENT_LANES looks like 'acme=exam|grading,*=grading'")
            clients[client.strip()] = allowed
        return cls(frozenset(lanes), default, clients, frozenset(urgent_lanes))

    def allowed(self, client_id: str) -> tuple[str, ...]:
        """The lanes this client may use, its default first."""
        listed = self.clients.get(client_id) or self.clients.get(ANY_CLIENT)
        if listed is not None:
            return listed
        return (self.default, *sorted(self.lanes - {self.default}))

    def resolve(self, client_id: str, requested: str | None) -> str:
        """The lane of a new job: the requested one if the client may use it, else its default.

        Raises `ValidationFailed` for an undeclared lane and `LaneNotAllowed` for one the
        client may not use.
        """
        allowed = self.allowed(client_id)
        if requested is None:
            return allowed[0]
        if requested not in self.lanes:
            raise ValidationFailed(
                f"no lane {requested!r}; lanes are {', '.join(sorted(self.lanes))}",
                errors=[{"field": "lane", "message": "unknown lane"}],
            )
        if requested not in allowed:
            raise LaneNotAllowed(
                f"client {client_id} may not use lane {requested!r}",
                lane=requested,
                allowed=list(allowed),
            )
        return requested
