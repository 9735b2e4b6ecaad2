"""Posted grades into each school's gradebook: at-least-once in, latest version out.

For each delivery of a GradePosted (school, assignment, student, version v):
- v at or below the stored mark: stale (a redelivery, or an older version arriving after
  a newer one): acknowledged, never written.
- another delivery is writing this student's grade right now: answered "busy", so the
  push is redelivered once that write has finished (two writes of one student's grade
  never race at the LMS).
- otherwise the school's GradebookWriter writes it. Success moves the mark to v.
  `GradebookBusy` (429, 5xx, timeouts) gives the lease back without moving the mark and
  answers non-2xx: Pub/Sub redelivers with the subscription's backoff, and the grade
  arrives once the LMS answers again. `GradebookRejected` is permanent: the mark moves to
  v with the reason (listed in the admin API) and the push is acknowledged.
  `GradebookWriteHeld` (another delivery is making what the write needs, such as the
  assignment's Classroom course work) gives the lease back and answers "busy", as a
  second write of the same student would be: not an outage.

Every `GradebookBusy` marks the school's gradebook as in an outage (from the first failure
to the next success); each change of state is logged once with `event` set, for the
log-based alert.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Protocol

from services.gradebook.event import GradePosted, posted_grade
from services.gradebook.ports import (
    GradebookBusy,
    GradebookRejected,
    GradebookWriteHeld,
    GradebookWriter,
)
from shared.domain.errors import GradeqError
from shared.domain.gradebook import Begin, HealthState, MarkKey, MarkStatus
from shared.ports import Clock, GradebookMarks

log = logging.getLogger(__name__)

#: How long a delivery holds a student's mark while it writes; longer than any write.
DEFAULT_LEASE = timedelta(seconds=60)
#: Seconds to suggest before the redelivery of a push held off by another's write.
HELD_RETRY_AFTER_S = 5.0


class GradebookUnavailable(GradeqError):
    """The school's gradebook cannot take the grade now; Pub/Sub redelivers the push."""

    slug = "gradebook-unavailable"
    title = "The school's gradebook cannot take the grade now"
    status = 503

    def __init__(self, detail: str, retry_after_s: float | None = None, **extensions: object):
        super().__init__(detail, **extensions)
        self.retry_after_s = retry_after_s


class GradeWriteInProgress(GradeqError):
    """Another delivery is writing this student's grade (or making what the write needs);
    Pub/Sub redelivers the push."""

    slug = "grade-write-in-progress"
    title = "Another delivery is writing this student's grade"
    status = 503

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.retry_after_s = HELD_RETRY_AFTER_S


class Connections(Protocol):
    """Each school's gradebook connection and roster."""

    def writer(self, school: str) -> GradebookWriter | None:
        """The school's writer; None when the school connects no gradebook."""
        ...

    def lms_user_id(self, school: str, student_id: str) -> str | None:
        """The student's user id in the school's LMS (None: not on the roster)."""
        ...


class Outcome(StrEnum):
    WRITTEN = "written"
    STALE = "stale"
    REJECTED = "rejected"
    NOT_CONNECTED = "not_connected"
    NO_STUDENT = "no_student"


@dataclass
class GradebookSubscriber:
    marks: GradebookMarks
    connections: Connections
    clock: Clock
    lease: timedelta = DEFAULT_LEASE

    def handle(self, grade: GradePosted) -> Outcome:
        """Write the grade unless a newer one is there; raise GradebookUnavailable or
        GradeWriteInProgress when the push must be redelivered."""
        fields: dict[str, object] = {
            "school": grade.school,
            "assignment_id": grade.assignment_id,
            "student_id": grade.student_id,
            "version": grade.version,
        }
        if grade.student_id is None:
            # A submission that names no student has no row in any gradebook.
            log.info("grade posted for no student: nothing to write", extra=fields)
            return Outcome.NO_STUDENT
        writer = self.connections.writer(grade.school)
        if writer is None:
            log.info("grade posted for a school without a gradebook", extra=fields)
            return Outcome.NOT_CONNECTED
        key = MarkKey(grade.school, grade.assignment_id, grade.student_id)
        holder = uuid.uuid4().hex
        answer = self.marks.begin(key, grade.version, holder, self.clock.now(), self.lease)
        if answer is Begin.STALE:
            log.info("older or repeated grade version skipped", extra=fields)
            return Outcome.STALE
        if answer is Begin.HELD:
            raise GradeWriteInProgress("another delivery is writing this student's grade")
        posted = posted_grade(grade, self.connections.lms_user_id(grade.school, grade.student_id))
        try:
            writer.write(posted)
        except GradebookBusy as busy:
            self.marks.release(key, holder)
            self._busy(grade.school, str(busy), busy.retry_after_s, fields)
            raise GradebookUnavailable(
                f"the gradebook of school {grade.school} is busy: {busy}",
                retry_after_s=busy.retry_after_s,
            ) from busy
        except GradebookWriteHeld as held:
            self.marks.release(key, holder)
            raise GradeWriteInProgress(str(held)) from held
        except GradebookRejected as rejected:
            self.marks.finish(
                key, grade.version, holder, MarkStatus.REJECTED, rejected.reason, self.clock.now()
            )
            self._answered(grade.school)
            log.error(
                "the gradebook rejected a grade",
                extra={**fields, "event": "gradebook_rejected", "reason": rejected.reason},
            )
            return Outcome.REJECTED
        except BaseException:
            self.marks.release(key, holder)
            raise
        self.marks.finish(key, grade.version, holder, MarkStatus.WRITTEN, None, self.clock.now())
        self._answered(grade.school)
        log.info("grade written to the gradebook", extra=fields)
        return Outcome.WRITTEN

    def _busy(
        self, school: str, error: str, retry_after_s: float | None, fields: dict[str, object]
    ) -> None:
        health = self.marks.record_busy(school, self.clock.now(), error, retry_after_s)
        extra = {**fields, "event": "gradebook_busy", "error": error, "failures": health.failures}
        if health.failures == 1:
            log.error("gradebook outage began", extra={**extra, "event": "gradebook_outage"})
        else:
            log.warning("gradebook still busy", extra=extra)

    def _answered(self, school: str) -> None:
        before, after = self.marks.record_success(school, self.clock.now())
        if before.state is HealthState.OUTAGE:
            log.warning(
                "gradebook outage ended",
                extra={
                    "school": school,
                    "event": "gradebook_recovered",
                    "outage_since": before.since.isoformat() if before.since else None,
                    "failures": before.failures,
                    "at": after.since.isoformat() if after.since else None,
                },
            )
