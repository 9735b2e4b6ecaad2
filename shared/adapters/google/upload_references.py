"""UploadReferences on Firestore: jobs whose `upload_objects` array holds an object name.

The job document lists its files' object names in `upload_objects` (written by the codec
with every job that has files), so one `array_contains` query on Firestore's automatic
single-field index answers, whatever the number of jobs. Object names already carry a
digest of the client, and the client is checked again on the document found (a job a
signed-in user stored before jobs had an author, client id `<school>:user:<uid>`, is its
school's).
"""

from __future__ import annotations

from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import firestore

from shared.adapters.google.firestore_codec import UPLOADS_FIELD
from shared.domain.authorization import owner_of
from shared.domain.errors import DependencyUnavailable


class FirestoreUploadReferences:
    """UploadReferences over the jobs collection."""

    def __init__(
        self, client: firestore.Client, jobs_collection: str, deadline_s: float = 10.0
    ) -> None:
        self._jobs = client.collection(jobs_collection)
        self._deadline_s = deadline_s

    def named_by_a_job(self, client_id: str, name: str) -> bool:
        query: Any = self._jobs.where(
            filter=firestore.FieldFilter(UPLOADS_FIELD, "array_contains", name)
        )
        try:
            found = list(query.limit(10).stream(timeout=self._deadline_s))
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore query failed: {exc}") from exc
        schools = [(s.to_dict() or {}).get("client_id") for s in found]
        return any(isinstance(c, str) and owner_of(c).school == client_id for c in schools)
