"""UploadReferences on SQLite: the client's jobs whose files name an object.

The school's jobs include those a signed-in user stored before jobs had an author (client
id `<school>:user:<uid>`), a range of the same index.
"""

from __future__ import annotations

from shared.adapters.embedded.job_store import SCHEMA as JOBS_SCHEMA
from shared.adapters.embedded.sqlite import SqliteDatabase, unavailable_on_error
from shared.domain.client_ids import USER_SCOPE_MARK

_NAMED = """
SELECT 1 FROM jobs, json_each(jobs.record, '$.request.files') AS file
WHERE (jobs.client_id = :client OR (jobs.client_id >= :legacy_from AND jobs.client_id < :legacy_to))
  AND json_extract(file.value, '$.object') = :name
LIMIT 1
"""


class SqliteUploadReferences:
    """UploadReferences over the jobs table (the client's jobs, by its index)."""

    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db
        db.ensure_schema(JOBS_SCHEMA)

    def named_by_a_job(self, client_id: str, name: str) -> bool:
        with unavailable_on_error("find the jobs naming an upload"):
            legacy = client_id + USER_SCOPE_MARK
            params = {
                "client": client_id,
                "legacy_from": legacy,
                "legacy_to": legacy[:-1] + chr(ord(legacy[-1]) + 1),
                "name": name,
            }
            row = self._db.connection().execute(_NAMED, params).fetchone()
            return row is not None
