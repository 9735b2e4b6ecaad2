"""What the gradebook subscriber remembers: a high-water mark per student's grade, and
each school's gradebook health.

A `GradeMark` is kept per (school, assignment, student). Its `version` is the highest
grade version that reached the gradebook (written, or refused for good): a delivery of a
version at or below it is stale and never written, so a redelivered or reordered older
grade cannot overwrite a newer one. While a write runs, the mark holds a short lease
(`holder`, `lease_until`), so two deliveries for the same student never write at once;
the second is answered "busy" and redelivered after the first has finished.

A `GradebookHealth` is kept per school: `ok`, or `outage` since the first failed write of
a streak, with the count of failures and the last error. The admin API shows it, and the
log line of each change of state feeds the alert.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any


class MarkStatus(StrEnum):
    """What became of the mark's version."""

    NONE = "none"  # nothing reached the gradebook yet
    WRITTEN = "written"
    REJECTED = "rejected"


class Begin(StrEnum):
    """The answer to "may this delivery write version v now?"."""

    WRITE = "write"  # the lease is yours: write, then finish or release
    STALE = "stale"  # v is at or below the mark: acknowledge without writing
    HELD = "held"  # another delivery is writing this student's grade: retry later


def safe_id(part: str) -> str:
    """`part` with '%', '|' and '/' escaped: usable in a Firestore document id."""
    return part.replace("%", "%25").replace("|", "%7C").replace("/", "%2F")


@dataclass(frozen=True)
class MarkKey:
    school: str
    assignment_id: str
    student_id: str

    def document_id(self) -> str:
        """One name per key, safe as a Firestore document id (no '/')."""
        return "|".join(safe_id(p) for p in (self.school, self.assignment_id, self.student_id))


@dataclass(frozen=True)
class GradeMark:
    key: MarkKey
    version: int = 0
    status: MarkStatus = MarkStatus.NONE
    detail: str | None = None
    updated_at: datetime | None = None
    holder: str | None = None
    lease_version: int | None = None
    lease_until: datetime | None = None

    def begin(
        self, version: int, holder: str, now: datetime, lease: timedelta
    ) -> tuple[Begin, GradeMark]:
        """Decide for a delivery of `version`; the mark to store when the answer is WRITE."""
        if version <= self.version:
            return Begin.STALE, self
        if (
            self.holder is not None
            and self.holder != holder
            and self.lease_until is not None
            and self.lease_until > now
        ):
            return Begin.HELD, self
        leased = dataclasses.replace(
            self, holder=holder, lease_version=version, lease_until=now + lease
        )
        return Begin.WRITE, leased

    def finish(
        self, version: int, holder: str, status: MarkStatus, detail: str | None, at: datetime
    ) -> GradeMark:
        """The mark after `version` reached the gradebook (or was refused for good)."""
        mark = self._released(holder)
        if version <= mark.version:
            return mark
        return dataclasses.replace(
            mark, version=version, status=status, detail=detail, updated_at=at
        )

    def release(self, holder: str) -> GradeMark:
        """The mark once `holder` gives its lease up without writing (the LMS was busy)."""
        return self._released(holder)

    def _released(self, holder: str) -> GradeMark:
        if self.holder != holder:
            return self
        return dataclasses.replace(self, holder=None, lease_version=None, lease_until=None)

    def to_record(self) -> dict[str, Any]:
        return {
            "school": self.key.school,
            "assignment_id": self.key.assignment_id,
            "student_id": self.key.student_id,
            "version": self.version,
            "status": self.status.value,
            "detail": self.detail,
            "updated_at": self.updated_at,
            "holder": self.holder,
            "lease_version": self.lease_version,
            "lease_until": self.lease_until,
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> GradeMark:
        return cls(
            key=MarkKey(record["school"], record["assignment_id"], record["student_id"]),
            version=int(record["version"]),
            status=MarkStatus(record["status"]),
            detail=record.get("detail"),
            updated_at=record.get("updated_at"),
            holder=record.get("holder"),
            lease_version=record.get("lease_version"),
            lease_until=record.get("lease_until"),
        )

    def as_dict(self) -> dict[str, Any]:
        """The public view (admin API): no lease internals."""
        return {
            "school": self.key.school,
            "assignment_id": self.key.assignment_id,
            "student_id": self.key.student_id,
            "version": self.version,
            "status": self.status.value,
            "detail": self.detail,
            "updated_at": self.updated_at.isoformat() if self.updated_at else None,
        }


class HealthState(StrEnum):
    OK = "ok"
    OUTAGE = "outage"


@dataclass(frozen=True)
class GradebookHealth:
    school: str
    state: HealthState = HealthState.OK
    since: datetime | None = None
    failures: int = 0
    last_error: str | None = None
    last_success_at: datetime | None = None
    retry_after_s: float | None = None

    def after_success(self, at: datetime) -> GradebookHealth:
        since = at if self.state is HealthState.OUTAGE or self.since is None else self.since
        return GradebookHealth(self.school, HealthState.OK, since, 0, None, at, None)

    def after_busy(self, at: datetime, error: str, retry_after_s: float | None) -> GradebookHealth:
        since = self.since if self.state is HealthState.OUTAGE and self.since else at
        return dataclasses.replace(
            self,
            state=HealthState.OUTAGE,
            since=since,
            failures=self.failures + 1,
            last_error=error,
            retry_after_s=retry_after_s,
        )

    def to_record(self) -> dict[str, Any]:
        return {
            "school": self.school,
            "state": self.state.value,
            "since": self.since,
            "failures": self.failures,
            "last_error": self.last_error,
            "last_success_at": self.last_success_at,
            "retry_after_s": self.retry_after_s,
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> GradebookHealth:
        return cls(
            school=record["school"],
            state=HealthState(record["state"]),
            since=record.get("since"),
            failures=int(record.get("failures") or 0),
            last_error=record.get("last_error"),
            last_success_at=record.get("last_success_at"),
            retry_after_s=record.get("retry_after_s"),
        )

    def as_dict(self) -> dict[str, Any]:
        record = self.to_record()
        for name in ("since", "last_success_at"):
            moment = record[name]
            record[name] = moment.isoformat() if moment else None
        return record
