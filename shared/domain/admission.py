"""Admission of new jobs: a ceiling per client and one for the whole backlog.

Both count jobs not yet final. Stores keep the counts as counters updated in the same
transaction as the job (+1 when created, -1 when it first reaches a final state), so a
check is a counter read, never a scan. Every job counts as its school's, whoever in the
school submitted it (`counted_as`): students share their school's ceiling.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.domain.authorization import owner_of
from shared.domain.errors import BacklogFull, GradeqError, TooManyActiveJobs


def counted_as(client_id: str) -> str:
    """The school whose counter a job of `client_id` moves (a user's scope in data stored
    before jobs had an author counts as its school)."""
    return owner_of(client_id).school


@dataclass(frozen=True)
class ActiveCounts:
    """Jobs not yet final: of one client, and of everyone."""

    client: int
    total: int


@dataclass(frozen=True)
class AdmissionLimits:
    """The ceilings, and how long a refused client is told to wait."""

    per_client: int
    backlog: int
    retry_after_s: int = 30

    def check(self, counts: ActiveCounts) -> None:
        """Raise when one more job would pass a ceiling (the client's is checked first)."""
        if counts.client >= self.per_client:
            raise TooManyActiveJobs(
                f"this client already has {counts.client} jobs not yet final "
                f"(the limit is {self.per_client})",
                retry_after_s=self.retry_after_s,
                limit=self.per_client,
            )
        if counts.total >= self.backlog:
            raise BacklogFull(
                "the service has too many jobs waiting; try again later",
                retry_after_s=self.retry_after_s,
            )

    def room(self, counts: ActiveCounts) -> int:
        """How many more jobs both ceilings admit at `counts`."""
        return max(0, min(self.per_client - counts.client, self.backlog - counts.total))

    def refusal(self, counts: ActiveCounts) -> GradeqError:
        """The error refusing one more job at `counts`, which leave no room."""
        try:
            self.check(counts)
        except (TooManyActiveJobs, BacklogFull) as full:
            return full
        raise AssertionError(f"{counts} leave room under {self}")
