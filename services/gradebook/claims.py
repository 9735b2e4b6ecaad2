"""Which LMS item Gradeq made for each assignment, agreed between instances.

Gradeq makes one item per assignment in a school's LMS where the LMS has none linked: a
Google Classroom course work, an LTI AGS line item. Neither API has an idempotent create,
so two instances (or two deliveries on one instance) writing an assignment's first grades
at once would each look, find nothing, and make one: two columns for one assignment. The
creation is therefore claimed first, in the gradebook's marks (one atomic
read-modify-write each, on both backends): the assignment's row with no student holds a
short lease while one holder looks for the item and makes it, then the item's id. Another
holder is answered HELD meanwhile (its delivery is redelivered), and reads the id once
it is recorded. A holder that dies leaves the lease to run out; the next one looks for the
item the dead one may have made before it makes one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Final

from services.gradebook.ports import GradebookWriteHeld
from shared.domain.gradebook import Begin, MarkKey, MarkStatus
from shared.ports import Clock, GradebookMarks

#: The marks row of an assignment's item: never a student's (student ids are at least one
#: character long).
ITEM_ROW: Final = ""
#: How long a claim holds off other holders; longer than any creation.
CLAIM_LEASE: Final = timedelta(seconds=60)


@dataclass
class ItemClaims:
    """Claims on making each (school, assignment)'s LMS item, and the ids made."""

    marks: GradebookMarks
    clock: Clock
    lease: timedelta = CLAIM_LEASE

    def recorded(self, school: str, assignment_id: str) -> str | None:
        """The id of the item made for the assignment (None: none recorded yet)."""
        mark = self.marks.mark(MarkKey(school, assignment_id, ITEM_ROW))
        return mark.detail if mark is not None and mark.version >= 1 else None

    def claim(self, school: str, assignment_id: str, holder: str) -> Begin:
        """WRITE: yours to find or make (then `record` or `release`); STALE: recorded
        already; HELD: another holder is making it."""
        key = MarkKey(school, assignment_id, ITEM_ROW)
        return self.marks.begin(key, 1, holder, self.clock.now(), self.lease)

    def record(self, school: str, assignment_id: str, holder: str, item_id: str) -> None:
        key = MarkKey(school, assignment_id, ITEM_ROW)
        self.marks.finish(key, 1, holder, MarkStatus.WRITTEN, item_id, self.clock.now())

    def release(self, school: str, assignment_id: str, holder: str) -> None:
        self.marks.release(MarkKey(school, assignment_id, ITEM_ROW), holder)

    def settled(self, school: str, assignment_id: str, holder: str) -> str | None:
        """Claim the assignment's item for `holder`: the recorded id (then nothing to
        make), or None when `holder` now holds the claim; GradebookWriteHeld when another
        holder is making it."""
        recorded = self.recorded(school, assignment_id)
        if recorded is not None:
            return recorded
        answer = self.claim(school, assignment_id, holder)
        if answer is Begin.WRITE:
            return None
        recorded = self.recorded(school, assignment_id) if answer is Begin.STALE else None
        if recorded is not None:
            return recorded
        raise GradebookWriteHeld(
            f"another delivery is creating the LMS item of assignment {assignment_id}"
        )
