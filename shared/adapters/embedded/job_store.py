"""JobStore on SQLite: create-if-absent and read-modify-write inside BEGIN IMMEDIATE."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from shared.adapters.embedded.sqlite import SqliteDatabase, unavailable_on_error
from shared.domain.admission import ActiveCounts, AdmissionLimits
from shared.domain.errors import JobNotFound
from shared.domain.job import DATETIME_FIELDS, FINAL_STATUSES, Job, JobStatus
from shared.ports import JobQuery

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    status TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    event_published INTEGER NOT NULL DEFAULT 0,
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS jobs_status_updated ON jobs (status, updated_at);
CREATE INDEX IF NOT EXISTS jobs_client_created
    ON jobs (client_id, json_extract(record, '$.created_at') DESC, id DESC);
CREATE TABLE IF NOT EXISTS job_counters (
    scope TEXT PRIMARY KEY,
    active INTEGER NOT NULL
)
"""
#: Serves find_unannounced: final jobs whose event is not marked published, by age.
UNANNOUNCED_INDEX = (
    "CREATE INDEX IF NOT EXISTS jobs_unannounced ON jobs (event_published, status, updated_at)"
)


def _migrate(db: SqliteDatabase) -> None:
    """Create the table, or add the event_published column to one made before it existed."""
    with db.transaction() as conn:
        for statement in SCHEMA.split(";"):
            conn.execute(statement)
        columns = {row["name"] for row in conn.execute("PRAGMA table_info(jobs)")}
        if "event_published" not in columns:
            conn.execute("ALTER TABLE jobs ADD COLUMN event_published INTEGER NOT NULL DEFAULT 0")
            conn.execute(
                "UPDATE jobs SET event_published ="
                " COALESCE(json_extract(record, '$.event_published'), 0)"
            )
        conn.execute(UNANNOUNCED_INDEX)


_FINAL = tuple(sorted(s.value for s in FINAL_STATUSES))
_UNANNOUNCED = (
    "SELECT record FROM jobs WHERE event_published = 0 AND status IN (?, ?, ?)"
    " AND updated_at < ? ORDER BY updated_at LIMIT ?"
)

#: The counter of every client's jobs not yet final; a client's is "client:<id>".
ALL_SCOPE = "all"
_FINAL_JSON = json.dumps(list(_FINAL))
# A database made before the counters existed starts them from its jobs, once.
_SEED_COUNTERS = """
INSERT OR IGNORE INTO job_counters (scope, active)
SELECT 'client:' || client_id, COUNT(*) FROM jobs
WHERE status NOT IN (SELECT value FROM json_each(?)) GROUP BY client_id
"""
_SEED_TOTAL = """
INSERT OR IGNORE INTO job_counters (scope, active)
SELECT 'all', COUNT(*) FROM jobs WHERE status NOT IN (SELECT value FROM json_each(?))
"""


# Newest first; an absent filter is NULL. Served by the jobs_client_created index.
_LIST = """
SELECT record FROM jobs
WHERE client_id = :client
  AND (:status IS NULL OR status = :status)
  AND (:submission IS NULL OR json_extract(record, '$.request.submission_id') = :submission)
  AND (:after_at IS NULL
       OR (json_extract(record, '$.created_at'), id) < (:after_at, :after_id))
ORDER BY json_extract(record, '$.created_at') DESC, id DESC
LIMIT :limit
"""


def _client_scope(client_id: str) -> str:
    return "client:" + client_id


def _sortable(moment: datetime) -> str:
    """Fixed-width UTC text, so SQL string order is time order."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def _encode(job: Job) -> str:
    record = job.to_record()
    for key in DATETIME_FIELDS:
        if record[key] is not None:
            record[key] = record[key].isoformat()
    return json.dumps(record, separators=(",", ":"))


def _decode(text: str) -> Job:
    record: dict[str, Any] = json.loads(text)
    for key in DATETIME_FIELDS:
        if record.get(key) is not None:
            record[key] = datetime.fromisoformat(record[key])
    return Job.from_record(record)


class SqliteJobStore:
    """Jobs as JSON records in the shared SQLite file; status and age are indexed."""

    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db
        _migrate(db)
        with unavailable_on_error("seed counters"), db.transaction() as conn:
            if conn.execute("SELECT 1 FROM job_counters WHERE scope = ?", (ALL_SCOPE,)).fetchone():
                return
            conn.execute(_SEED_COUNTERS, (_FINAL_JSON,))
            conn.execute(_SEED_TOTAL, (_FINAL_JSON,))

    def create(self, job: Job, limits: AdmissionLimits | None = None) -> tuple[Job, bool]:
        with unavailable_on_error("create job"), self._db.transaction() as conn:
            row = conn.execute("SELECT record FROM jobs WHERE id = ?", (job.id,)).fetchone()
            if row is not None:
                return _decode(row["record"]), False
            if limits is not None:
                limits.check(self._counts(conn, job.client_id))
            self._write(conn, job, insert=True)
            self._count(conn, job.client_id, +1)
        return job, True

    def list_jobs(self, query: JobQuery) -> list[Job]:
        after_at, after_id = (
            (query.after[0].isoformat(), query.after[1]) if query.after else (None, None)
        )
        params = {
            "client": query.client_id,
            "status": query.status.value if query.status else None,
            "submission": query.submission_id,
            "after_at": after_at,
            "after_id": after_id,
            "limit": query.limit,
        }
        with unavailable_on_error("list jobs"):
            rows = self._db.connection().execute(_LIST, params).fetchall()
        return [_decode(r["record"]) for r in rows]

    def active_counts(self, client_id: str) -> ActiveCounts:
        with unavailable_on_error("read counters"):
            return self._counts(self._db.connection(), client_id)

    def active_jobs_of(self, client_id: str) -> int:
        return self.active_counts(client_id).client

    @staticmethod
    def _counts(conn: sqlite3.Connection, client_id: str) -> ActiveCounts:
        rows = dict(
            conn.execute(
                "SELECT scope, active FROM job_counters WHERE scope IN (?, ?)",
                (_client_scope(client_id), ALL_SCOPE),
            ).fetchall()
        )
        return ActiveCounts(rows.get(_client_scope(client_id), 0), rows.get(ALL_SCOPE, 0))

    @staticmethod
    def _count(conn: sqlite3.Connection, client_id: str, delta: int) -> None:
        for scope in (_client_scope(client_id), ALL_SCOPE):
            conn.execute(
                "INSERT INTO job_counters (scope, active) VALUES (?, MAX(0, ?))"
                " ON CONFLICT (scope) DO UPDATE SET active = MAX(0, active + ?)",
                (scope, delta, delta),
            )

    def get(self, job_id: str) -> Job | None:
        with unavailable_on_error("read job"):
            row = (
                self._db.connection()
                .execute("SELECT record FROM jobs WHERE id = ?", (job_id,))
                .fetchone()
            )
        return _decode(row["record"]) if row else None

    def update(self, job_id: str, mutate: Callable[[Job], Job]) -> Job:
        with unavailable_on_error("update job"), self._db.transaction() as conn:
            row = conn.execute("SELECT record FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is None:
                raise JobNotFound(f"no job {job_id}")
            current = _decode(row["record"])
            updated = mutate(current)
            self._write(conn, updated, insert=False)
            if updated.status.is_final and not current.status.is_final:
                self._count(conn, updated.client_id, -1)
        return updated

    def find(
        self,
        status: JobStatus,
        updated_before: datetime,
        limit: int,
        updated_after: datetime | None = None,
    ) -> list[Job]:
        after = _sortable(updated_after) if updated_after is not None else ""
        with unavailable_on_error("find jobs"):
            rows = (
                self._db.connection()
                .execute(
                    "SELECT record FROM jobs WHERE status = ? AND updated_at < ?"
                    " AND updated_at > ? ORDER BY updated_at LIMIT ?",
                    (status.value, _sortable(updated_before), after, limit),
                )
                .fetchall()
            )
        return [_decode(r["record"]) for r in rows]

    def find_unannounced(self, updated_before: datetime, limit: int) -> list[Job]:
        with unavailable_on_error("find unannounced jobs"):
            rows = (
                self._db.connection()
                .execute(_UNANNOUNCED, (*_FINAL, _sortable(updated_before), limit))
                .fetchall()
            )
        return [_decode(r["record"]) for r in rows]

    def ping(self) -> None:
        with unavailable_on_error("ping"):
            self._db.connection().execute("SELECT 1 FROM jobs LIMIT 1").fetchall()

    @staticmethod
    def _write(conn: sqlite3.Connection, job: Job, *, insert: bool) -> None:
        params = (
            job.client_id,
            job.status.value,
            _sortable(job.updated_at),
            int(job.event_published),
            _encode(job),
            job.id,
        )
        if insert:
            conn.execute(
                "INSERT INTO jobs (client_id, status, updated_at, event_published, record, id)"
                " VALUES (?,?,?,?,?,?)",
                params,
            )
        else:
            conn.execute(
                "UPDATE jobs SET client_id=?, status=?, updated_at=?, event_published=?,"
                " record=? WHERE id=?",
                params,
            )
