"""The review queue on Firestore: a query of the jobs collection by the job's review.

Needs the composite indexes (client_id, review.status, review.held_at, __name__) and
(client_id, request.assignment_id, review.status, review.held_at, __name__): see
terraform/firestore.tf.
"""

from __future__ import annotations

from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import firestore

from shared.adapters.google.firestore_codec import from_document
from shared.domain.errors import DependencyUnavailable
from shared.domain.job import Job
from shared.domain.review import ReviewStatus
from shared.ports import ReviewCursor


class FirestoreReviewQueue:
    """ReviewQueue over the jobs collection the FirestoreJobStore writes."""

    def __init__(self, client: firestore.Client, collection: str, deadline_s: float = 10.0) -> None:
        self._jobs = client.collection(collection)
        self._deadline_s = deadline_s

    def held(
        self,
        client_id: str,
        assignment_id: str | None,
        limit: int,
        after: ReviewCursor | None = None,
    ) -> list[Job]:
        return self._query(ReviewStatus.HELD, client_id, assignment_id, limit, after)

    def reviewed(self, client_id: str, assignment_id: str | None, limit: int) -> list[Job]:
        return self._query(ReviewStatus.REVIEWED, client_id, assignment_id, limit, None)

    def unannounced(self, limit: int) -> list[Job]:
        # An equality filter alone: served by the automatic single-field index.
        query: Any = self._jobs.where(filter=firestore.FieldFilter("review.announced", "==", False))
        try:
            snapshots = list(query.limit(limit).stream(timeout=self._deadline_s))
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore query failed: {exc}") from exc
        return [from_document(s.id, s.to_dict()) for s in snapshots]

    def _query(
        self,
        status: ReviewStatus,
        client_id: str,
        assignment_id: str | None,
        limit: int,
        after: ReviewCursor | None,
    ) -> list[Job]:
        q: Any = self._jobs.where(filter=firestore.FieldFilter("client_id", "==", client_id))
        if assignment_id is not None:
            q = q.where(filter=firestore.FieldFilter("request.assignment_id", "==", assignment_id))
        q = q.where(filter=firestore.FieldFilter("review.status", "==", status.value))
        q = q.order_by("review.held_at").order_by("__name__")
        if after is not None:
            q = q.start_after(
                {"review.held_at": after.held_at, "__name__": self._jobs.document(after.job_id)}
            )
        try:
            snapshots = list(q.limit(limit).stream(timeout=self._deadline_s))
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore query failed: {exc}") from exc
        return [from_document(s.id, s.to_dict()) for s in snapshots]
