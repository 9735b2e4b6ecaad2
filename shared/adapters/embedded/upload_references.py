"""UploadReferences on SQLite: the client's jobs whose files name an object."""

from __future__ import annotations

from shared.adapters.embedded.job_store import SCHEMA as JOBS_SCHEMA
from shared.adapters.embedded.sqlite import SqliteDatabase, unavailable_on_error

_NAMED = """
SELECT 1 FROM jobs, json_each(jobs.record, '$.request.files') AS file
WHERE jobs.client_id = ? AND json_extract(file.value, '$.object') = ?
LIMIT 1
"""


class SqliteUploadReferences:
    """UploadReferences over the jobs table (the client's jobs, by its index)."""

    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db
        db.ensure_schema(JOBS_SCHEMA)

    def named_by_a_job(self, client_id: str, name: str) -> bool:
        with unavailable_on_error("find the jobs naming an upload"):
            row = self._db.connection().execute(_NAMED, (client_id, name)).fetchone()
            return row is not None
