"""JobEraser on SQLite: a job row, its tally change and its events' dedup records.

The job's row is deleted where it was read, in one transaction with its assignment round's
counters, so the tally never counts a job that is gone. Its events' records become
tombstones in one transaction, for every subscriber that records events whether it had
recorded them yet or not: a later delivery finds the tombstone and records nothing.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from shared.adapters.embedded.assignment_store import SCHEMA as TALLY_SCHEMA
from shared.adapters.embedded.job_store import SCHEMA as JOBS_SCHEMA
from shared.adapters.embedded.processed_events import SCHEMA as PROCESSED_SCHEMA
from shared.adapters.embedded.sqlite import SqliteDatabase, unavailable_on_error
from shared.domain.client_ids import USER_SCOPE_MARK
from shared.domain.erasure import RECORDING_SUBSCRIBERS, TOMBSTONE, tally_removal
from shared.domain.job import DATETIME_FIELDS, Job

# A student's jobs: the school's naming them, and those stored before jobs had an author
# (client id `<school>:user:<uid>`): any user's naming them, and the student's own as a
# signed-in user (their user id is their student id), whatever student id they name.
_OF_STUDENT = """
SELECT record FROM jobs
WHERE ((client_id = :school OR (client_id >= :legacy_from AND client_id < :legacy_to))
       AND json_extract(record, '$.request.student_id') = :student)
   OR client_id = :own_scope
ORDER BY id LIMIT :limit
"""


def _decode(text: str) -> Job:
    record: dict[str, Any] = json.loads(text)
    for key in DATETIME_FIELDS:
        if record.get(key) is not None:
            record[key] = datetime.fromisoformat(record[key])
    return Job.from_record(record)


class SqliteJobEraser:
    """JobEraser on the shared SQLite file."""

    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db
        for schema in (JOBS_SCHEMA, TALLY_SCHEMA, PROCESSED_SCHEMA):
            db.ensure_schema(schema)

    def jobs_of_student(self, client_id: str, student_id: str, limit: int) -> list[Job]:
        with unavailable_on_error("find a student's jobs"):
            legacy = client_id + USER_SCOPE_MARK
            params = {
                "school": client_id,
                "legacy_from": legacy,
                "legacy_to": legacy[:-1] + chr(ord(legacy[-1]) + 1),
                "student": student_id,
                "own_scope": legacy + student_id,
                "limit": limit,
            }
            rows = self._db.connection().execute(_OF_STUDENT, params)
            return [_decode(r["record"]) for r in rows.fetchall()]

    def delete(self, job: Job) -> bool:
        with unavailable_on_error("delete a job"), self._db.transaction() as conn:
            row = conn.execute("SELECT record FROM jobs WHERE id = ?", (job.id,)).fetchone()
            if row is None:
                return False
            stored = _decode(row["record"])
            if stored.updated_at != job.updated_at or not stored.status.is_final:
                return False
            conn.execute("DELETE FROM jobs WHERE id = ?", (job.id,))
            change = tally_removal(stored)
            if change is not None:
                conn.executemany(
                    "INSERT INTO assignment_tallies (assignment_id, round, field, value)"
                    " VALUES (?, ?, ?, ?) ON CONFLICT (assignment_id, round, field)"
                    " DO UPDATE SET value = value + excluded.value",
                    [(change.assignment_id, change.round, f, d) for f, d in change.deltas.items()],
                )
        return True

    def forget_events(self, event_ids: list[str]) -> int:
        if not event_ids:
            return 0
        marks = ",".join("?" * len(event_ids))
        tombstone = json.dumps(TOMBSTONE, separators=(",", ":"))
        now = datetime.now(UTC).isoformat()
        with unavailable_on_error("forget events"), self._db.transaction() as conn:
            cursor = conn.execute(
                f"UPDATE processed_events SET record = ? WHERE event_id IN ({marks})"  # noqa: S608 (marks only)
                " AND record != ?",
                [tombstone, *event_ids, tombstone],
            )
            forgotten = int(cursor.rowcount)
            conn.executemany(
                "INSERT OR IGNORE INTO processed_events"
                " (subscriber, event_id, record, processed_at) VALUES (?, ?, ?, ?)",
                [(s, e, tombstone, now) for s in RECORDING_SUBSCRIBERS for e in event_ids],
            )
        return forgotten
