"""GradebookMarks on Firestore: a document per grade mark, one per school's health.

Each change is one Firestore transaction (read, decide in the domain, write), so two
instances racing on the same student's mark serialize on the document.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import firestore

from shared.adapters.google import metering
from shared.adapters.google.clients import DEFAULT_DEADLINE_S, bounded_retry
from shared.adapters.google.firestore_codec import with_plain_datetimes
from shared.domain.errors import DependencyUnavailable
from shared.domain.gradebook import (
    Begin,
    GradebookHealth,
    GradeMark,
    MarkKey,
    MarkStatus,
    safe_id,
)

_MARK_TIMES = ("updated_at", "lease_until")
_HEALTH_TIMES = ("since", "last_success_at")


class FirestoreGradebookMarks:
    """Grade marks and gradebook health in two Firestore collections."""

    def __init__(
        self,
        client: firestore.Client,
        marks: str = "gradebook_marks",
        health: str = "gradebook_health",
        deadline_s: float = DEFAULT_DEADLINE_S,
    ) -> None:
        self._client = client
        self._marks = client.collection(marks)
        self._health = client.collection(health)
        self._retry = bounded_retry(deadline_s)
        self._deadline_s = deadline_s
        self.meter = metering.Meter()

    def _mark_in(
        self, transaction: firestore.Transaction, ref: firestore.DocumentReference, key: MarkKey
    ) -> GradeMark:
        snapshot = ref.get(transaction=transaction, retry=self._retry, timeout=self._deadline_s)
        self.meter.add(metering.FIRESTORE_READS)
        if not snapshot.exists:
            return GradeMark(key)
        return GradeMark.from_record(with_plain_datetimes(snapshot.to_dict() or {}, _MARK_TIMES))

    def _change_mark(
        self, key: MarkKey, change: Callable[[GradeMark], tuple[Any, GradeMark | None]]
    ) -> Any:
        ref = self._marks.document(key.document_id())

        @firestore.transactional
        def apply(transaction: firestore.Transaction) -> Any:
            answer, after = change(self._mark_in(transaction, ref, key))
            if after is not None:
                transaction.set(ref, after.to_record())
            return answer

        try:
            result = apply(self._client.transaction())
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore transaction failed: {exc}") from exc
        self.meter.add(metering.FIRESTORE_WRITES)
        return result

    def begin(
        self, key: MarkKey, version: int, holder: str, now: datetime, lease: timedelta
    ) -> Begin:
        def change(mark: GradeMark) -> tuple[Begin, GradeMark | None]:
            answer, leased = mark.begin(version, holder, now, lease)
            return answer, leased if answer is Begin.WRITE else None

        answer: Begin = self._change_mark(key, change)
        return answer

    def finish(
        self,
        key: MarkKey,
        version: int,
        holder: str,
        status: MarkStatus,
        detail: str | None,
        at: datetime,
    ) -> GradeMark:
        def change(mark: GradeMark) -> tuple[GradeMark, GradeMark]:
            after = mark.finish(version, holder, status, detail, at)
            return after, after

        finished: GradeMark = self._change_mark(key, change)
        return finished

    def release(self, key: MarkKey, holder: str) -> None:
        def change(mark: GradeMark) -> tuple[None, GradeMark | None]:
            after = mark.release(holder)
            return None, after if after != mark else None

        self._change_mark(key, change)

    def mark(self, key: MarkKey) -> GradeMark | None:
        try:
            snapshot = self._marks.document(key.document_id()).get(
                retry=self._retry, timeout=self._deadline_s
            )
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore get failed: {exc}") from exc
        self.meter.add(metering.FIRESTORE_READS)
        if not snapshot.exists:
            return None
        return GradeMark.from_record(with_plain_datetimes(snapshot.to_dict() or {}, _MARK_TIMES))

    def rejected(self, school: str | None = None) -> list[GradeMark]:
        query = self._marks.where(
            filter=firestore.FieldFilter("status", "==", MarkStatus.REJECTED.value)
        )
        if school is not None:
            query = query.where(filter=firestore.FieldFilter("school", "==", school))
        try:
            documents = list(query.stream(retry=self._retry, timeout=self._deadline_s))
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore query failed: {exc}") from exc
        self.meter.add(metering.FIRESTORE_READS, max(1, len(documents)))
        marks = [
            GradeMark.from_record(with_plain_datetimes(d.to_dict() or {}, _MARK_TIMES))
            for d in documents
        ]
        return sorted(
            marks,
            key=lambda m: (m.updated_at.isoformat() if m.updated_at else "", m.key.document_id()),
        )

    def _change_health(
        self, school: str, change: Callable[[GradebookHealth], GradebookHealth]
    ) -> tuple[GradebookHealth, GradebookHealth]:
        ref = self._health.document(safe_id(school))

        @firestore.transactional
        def apply(transaction: firestore.Transaction) -> tuple[GradebookHealth, GradebookHealth]:
            snapshot = ref.get(transaction=transaction, retry=self._retry, timeout=self._deadline_s)
            before = (
                GradebookHealth.from_record(
                    with_plain_datetimes(snapshot.to_dict() or {}, _HEALTH_TIMES)
                )
                if snapshot.exists
                else GradebookHealth(school)
            )
            after = change(before)
            transaction.set(ref, after.to_record())
            return before, after

        try:
            result: tuple[GradebookHealth, GradebookHealth] = apply(self._client.transaction())
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore transaction failed: {exc}") from exc
        self.meter.add(metering.FIRESTORE_WRITES)
        return result

    def record_success(self, school: str, at: datetime) -> tuple[GradebookHealth, GradebookHealth]:
        return self._change_health(school, lambda h: h.after_success(at))

    def record_busy(
        self, school: str, at: datetime, error: str, retry_after_s: float | None
    ) -> GradebookHealth:
        return self._change_health(school, lambda h: h.after_busy(at, error, retry_after_s))[1]

    def health(self) -> list[GradebookHealth]:
        try:
            documents = list(self._health.stream(retry=self._retry, timeout=self._deadline_s))
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore query failed: {exc}") from exc
        self.meter.add(metering.FIRESTORE_READS, max(1, len(documents)))
        found = [
            GradebookHealth.from_record(with_plain_datetimes(d.to_dict() or {}, _HEALTH_TIMES))
            for d in documents
        ]
        return sorted(found, key=lambda h: h.school)
