"""The review queue on SQLite: the held and reviewed jobs of a client, read from `jobs`.

A review is part of its job's record (`review`), written by the job store; this module
only adds an index on the review's status and hold time, and reads with it.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from shared.adapters.embedded.job_store import SCHEMA as JOBS_SCHEMA
from shared.adapters.embedded.sqlite import SqliteDatabase, unavailable_on_error
from shared.domain.job import DATETIME_FIELDS, Job
from shared.domain.review import ReviewStatus
from shared.ports import ReviewCursor

SCHEMA = """
CREATE INDEX IF NOT EXISTS jobs_review_queue ON jobs (
    client_id,
    json_extract(record, '$.review.status'),
    json_extract(record, '$.review.held_at'),
    id
) WHERE json_extract(record, '$.review') IS NOT NULL
"""

_QUEUE = """
SELECT record FROM jobs
WHERE client_id = :client
  AND json_extract(record, '$.review') IS NOT NULL
  AND json_extract(record, '$.review.status') = :status
  AND (:assignment IS NULL OR json_extract(record, '$.request.assignment_id') = :assignment)
  AND (:after_at IS NULL
       OR (json_extract(record, '$.review.held_at'), id) > (:after_at, :after_id))
ORDER BY json_extract(record, '$.review.held_at'), id
LIMIT :limit
"""


# Rare (a crash between a review's write and its events): a scan of the held jobs.
_UNANNOUNCED = """
SELECT record FROM jobs
WHERE json_extract(record, '$.review') IS NOT NULL
  AND json_extract(record, '$.review.announced') = 0
LIMIT ?
"""


def _decode(text: str) -> Job:
    record: dict[str, Any] = json.loads(text)
    for key in DATETIME_FIELDS:
        if record.get(key) is not None:
            record[key] = datetime.fromisoformat(record[key])
    return Job.from_record(record)


class SqliteReviewQueue:
    """ReviewQueue over the shared SQLite file's jobs table."""

    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db
        db.ensure_schema(JOBS_SCHEMA)  # the job store's own table, should it come second
        db.ensure_schema(SCHEMA)

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
        with unavailable_on_error("read the unannounced reviews"):
            rows = self._db.connection().execute(_UNANNOUNCED, (limit,)).fetchall()
        return [_decode(r["record"]) for r in rows]

    def _query(
        self,
        status: ReviewStatus,
        client_id: str,
        assignment_id: str | None,
        limit: int,
        after: ReviewCursor | None,
    ) -> list[Job]:
        params = {
            "client": client_id,
            "status": status.value,
            "assignment": assignment_id,
            "after_at": after.held_at if after else None,
            "after_id": after.job_id if after else None,
            "limit": limit,
        }
        with unavailable_on_error("read the review queue"):
            rows = self._db.connection().execute(_QUEUE, params).fetchall()
        return [_decode(r["record"]) for r in rows]
