"""JobStore on SQLite: create-if-absent and read-modify-write inside BEGIN IMMEDIATE."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from shared.adapters.embedded.sqlite import SqliteDatabase, unavailable_on_error
from shared.domain.admission import ActiveCounts, AdmissionLimits, counted_as
from shared.domain.client_ids import USER_SCOPE_MARK
from shared.domain.errors import DependencyUnavailable, GradeqError, JobNotFound
from shared.domain.job import DATETIME_FIELDS, Job
from shared.domain.status import FINAL_STATUSES, JobStatus
from shared.ports import Admission, JobCursor, JobFilter, JobQuery

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


#: Columns the operator's listings and queue health filter and sort on, added to tables
#: made before them and filled from each record.
LISTING_COLUMNS = ("created_at", "completed_at", "assignment_id")
LISTING_INDEXES = (
    "CREATE INDEX IF NOT EXISTS jobs_created ON jobs (created_at, id)",
    "CREATE INDEX IF NOT EXISTS jobs_status_created ON jobs (status, created_at, id)",
    "CREATE INDEX IF NOT EXISTS jobs_client_created ON jobs (client_id, created_at, id)",
    "CREATE INDEX IF NOT EXISTS jobs_assignment_created ON jobs (assignment_id, created_at, id)",
    "CREATE INDEX IF NOT EXISTS jobs_completed ON jobs (completed_at)",
)


def _listing_values(job: Job) -> tuple[str, str | None, str | None]:
    completed = _sortable(job.completed_at) if job.completed_at is not None else None
    return _sortable(job.created_at), completed, job.request.assignment_id


def _add_listing_columns(conn: sqlite3.Connection) -> None:
    columns = {row["name"] for row in conn.execute("PRAGMA table_info(jobs)")}
    missing = [c for c in LISTING_COLUMNS if c not in columns]
    for column in missing:
        conn.execute(f"ALTER TABLE jobs ADD COLUMN {column} TEXT")
    if missing:
        for row in conn.execute("SELECT id, record FROM jobs").fetchall():
            values = _listing_values(_decode(row["record"]))
            conn.execute(
                "UPDATE jobs SET created_at=?, completed_at=?, assignment_id=? WHERE id=?",
                (*values, row["id"]),
            )
    for statement in LISTING_INDEXES:
        conn.execute(statement)


def _migrate(db: SqliteDatabase) -> None:
    """Create the table, or add the columns a table made before them lacks."""
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
        _add_listing_columns(conn)


_FINAL = tuple(sorted(s.value for s in FINAL_STATUSES))
_UNANNOUNCED = (
    "SELECT record FROM jobs WHERE event_published = 0 AND status IN (?, ?, ?)"
    " AND updated_at < ? ORDER BY updated_at LIMIT ?"
)

#: The counter of every client's jobs not yet final; a client's is "client:<id>".
ALL_SCOPE = "all"
_FINAL_JSON = json.dumps(list(_FINAL))
# A database made before the counters existed starts them from its jobs, once; a user
# scope's jobs count as its client's (`counted_as`).
_SEED_COUNTERS = """
INSERT OR IGNORE INTO job_counters (scope, active)
SELECT 'client:' || owner, COUNT(*) FROM (
  SELECT CASE WHEN instr(client_id, :mark) > 0
              THEN substr(client_id, 1, instr(client_id, :mark) - 1)
              ELSE client_id END AS owner
  FROM jobs WHERE status NOT IN (SELECT value FROM json_each(:final))
) GROUP BY owner
"""
_SEED_TOTAL = """
INSERT OR IGNORE INTO job_counters (scope, active)
SELECT 'all', COUNT(*) FROM jobs WHERE status NOT IN (SELECT value FROM json_each(?))
"""


# What admitting a job reads: the record under its id (if the key was used) and the
# client's and everyone's counters of jobs not yet final.
_ADMIT_READ = """
SELECT (SELECT record FROM jobs WHERE id = :id) AS record,
       (SELECT active FROM job_counters WHERE scope = :client) AS client,
       (SELECT active FROM job_counters WHERE scope = :all) AS total
"""
# Moves the client's counter and everyone's by the same delta, never below 0.
_MOVE_COUNTERS = (
    "INSERT INTO job_counters (scope, active) VALUES (?1, MAX(0, ?3)), (?2, MAX(0, ?3))"
    " ON CONFLICT (scope) DO UPDATE SET active = MAX(0, active + ?3)"
)


# Newest first; an absent filter is NULL. Served by the jobs_client_created index.
# A school's jobs include those a signed-in user stored before jobs had an author: their
# client_id is the user's scope `<school>:user:<uid>`, a range of the same index.
_LIST = """
SELECT record FROM jobs
WHERE (client_id = :client OR (client_id >= :legacy_from AND client_id < :legacy_to))
  AND (:author IS NULL OR json_extract(record, '$.author') = :author
       OR client_id = :legacy_author)
  AND (:status IS NULL OR status = :status)
  AND (:submission IS NULL OR json_extract(record, '$.request.submission_id') = :submission)
  AND (:after_at IS NULL
       OR (json_extract(record, '$.created_at'), id) < (:after_at, :after_id))
ORDER BY json_extract(record, '$.created_at') DESC, id DESC
LIMIT :limit
"""


def _client_scope(client_id: str) -> str:
    return "client:" + counted_as(client_id)


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


#: Called with each job write's connection, the job before (None: created) and after, to
#: move other counters in the same transaction (an assignment's tally).
WriteHook = Callable[[sqlite3.Connection, Job | None, Job], None]


class _RecentJobs:
    """The jobs this store last read or wrote, each with its record's exact text.

    A job is read and rewritten several times in a row by one process (claimed, renewed,
    finished, announced); when the record read is the text remembered, the remembered
    job is used instead of decoding it again. A record changed by anyone else differs,
    and is decoded.
    """

    def __init__(self, size: int = 2048) -> None:
        self._size = size
        self._jobs: OrderedDict[str, tuple[str, Job]] = OrderedDict()
        self._guard = threading.Lock()

    def decode(self, job_id: str, text: str) -> Job:
        with self._guard:
            entry = self._jobs.get(job_id)
        if entry is not None and entry[0] == text:
            return entry[1]
        job = _decode(text)
        self.remember(job, text)
        return job

    def remember(self, job: Job, text: str) -> None:
        with self._guard:
            self._jobs[job.id] = (text, job)
            self._jobs.move_to_end(job.id)
            if len(self._jobs) > self._size:
                self._jobs.popitem(last=False)


class SqliteJobStore:
    """Jobs as JSON records in the shared SQLite file; status and age are indexed."""

    def __init__(self, db: SqliteDatabase, on_write: WriteHook | None = None) -> None:
        self._db = db
        self._on_write = on_write
        self._recent = _RecentJobs()
        _migrate(db)
        with unavailable_on_error("seed counters"), db.transaction() as conn:
            if conn.execute("SELECT 1 FROM job_counters WHERE scope = ?", (ALL_SCOPE,)).fetchone():
                return
            conn.execute(_SEED_COUNTERS, {"mark": USER_SCOPE_MARK, "final": _FINAL_JSON})
            conn.execute(_SEED_TOTAL, (_FINAL_JSON,))

    def create(self, job: Job, limits: AdmissionLimits | None = None) -> tuple[Job, bool]:
        admission = self.admit(job, limits)
        return admission.job, admission.created

    def admit(self, job: Job, limits: AdmissionLimits | None = None) -> Admission:
        # BEGIN IMMEDIATE: the counts checked are the counts the job is added to.
        with unavailable_on_error("create job"), self._db.transaction() as conn:
            # The job's record and both counters in one statement.
            row = conn.execute(
                _ADMIT_READ,
                {"id": job.id, "client": _client_scope(job.client_id), "all": ALL_SCOPE},
            ).fetchone()
            counts = ActiveCounts(row["client"] or 0, row["total"] or 0)
            if row["record"] is not None:
                return Admission(self._recent.decode(job.id, row["record"]), False, counts.client)
            if limits is not None:
                limits.check(counts)
            self._write(conn, job, insert=True)
            self._count(conn, job.client_id, +1)
            if self._on_write is not None:
                self._on_write(conn, None, job)
        return Admission(job, True, counts.client)

    def list_jobs(self, query: JobQuery) -> list[Job]:
        after_at, after_id = (
            (query.after[0].isoformat(), query.after[1]) if query.after else (None, None)
        )
        legacy = query.client_id + USER_SCOPE_MARK
        params = {
            "client": query.client_id,
            "legacy_from": legacy,
            "legacy_to": legacy[:-1] + chr(ord(legacy[-1]) + 1),
            "author": query.author,
            "legacy_author": legacy + query.author if query.author else None,
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
    def counts_in(conn: sqlite3.Connection, client_id: str) -> ActiveCounts:
        """The counts as the transaction on `conn` sees them (its own writes included)."""
        return SqliteJobStore._counts(conn, client_id)

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
        conn.execute(_MOVE_COUNTERS, (_client_scope(client_id), ALL_SCOPE, delta))

    def get(self, job_id: str) -> Job | None:
        with unavailable_on_error("read job"):
            row = (
                self._db.connection()
                .execute("SELECT record FROM jobs WHERE id = ?", (job_id,))
                .fetchone()
            )
        return self._recent.decode(job_id, row["record"]) if row else None

    def update(self, job_id: str, mutate: Callable[[Job], Job]) -> Job:
        with unavailable_on_error("update job"), self._db.transaction() as conn:
            return self._update(conn, job_id, mutate)

    def reopen(self, job_id: str, mutate: Callable[[Job], Job], limits: AdmissionLimits) -> Job:
        # BEGIN IMMEDIATE: the counts checked are the counts the job is added to again.
        with unavailable_on_error("reopen job"), self._db.transaction() as conn:
            return self._update(conn, job_id, mutate, limits)

    def update_each(
        self, mutations: Mapping[str, Callable[[Job], Job]]
    ) -> dict[str, Job | GradeqError]:
        """Apply each job's mutation in one transaction (the heartbeat's renewals).

        A mutation raising a domain error leaves its job as it was and answers the error
        in its place; the others are written.
        """
        outcomes: dict[str, Job | GradeqError] = {}
        if not mutations:
            return outcomes
        with unavailable_on_error("update jobs"), self._db.transaction() as conn:
            for job_id, mutate in mutations.items():
                try:
                    outcomes[job_id] = self._update(conn, job_id, mutate)
                except DependencyUnavailable:
                    raise
                except GradeqError as exc:
                    outcomes[job_id] = exc
        return outcomes

    def _update(
        self,
        conn: sqlite3.Connection,
        job_id: str,
        mutate: Callable[[Job], Job],
        limits: AdmissionLimits | None = None,
    ) -> Job:
        row = conn.execute("SELECT record FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            raise JobNotFound(f"no job {job_id}")
        current = self._recent.decode(job_id, row["record"])
        updated = mutate(current)
        if limits is not None and current.status.is_final and not updated.status.is_final:
            limits.check(self._counts(conn, updated.client_id))
        self._write(conn, updated, insert=False)
        if updated.status.is_final and not current.status.is_final:
            self._count(conn, updated.client_id, -1)
        elif current.status.is_final and not updated.status.is_final:
            self._count(conn, updated.client_id, +1)  # replayed or regraded
        if self._on_write is not None:
            self._on_write(conn, current, updated)
        return updated

    def find(
        self,
        status: JobStatus,
        updated_before: datetime,
        limit: int,
        updated_after: datetime | None = None,
        after_id: str | None = None,
    ) -> list[Job]:
        sql = "SELECT record FROM jobs WHERE status = ? AND updated_at < ?"
        params: list[Any] = [status.value, _sortable(updated_before)]
        if updated_after is not None and after_id is not None:
            sql += " AND (updated_at > ? OR (updated_at = ? AND id > ?))"
            moment = _sortable(updated_after)
            params.extend((moment, moment, after_id))
        elif updated_after is not None:
            sql += " AND updated_at > ?"
            params.append(_sortable(updated_after))
        sql += " ORDER BY updated_at, id LIMIT ?"
        with unavailable_on_error("find jobs"):
            rows = self._db.connection().execute(sql, (*params, limit)).fetchall()
        return [_decode(r["record"]) for r in rows]

    def find_unannounced(self, updated_before: datetime, limit: int) -> list[Job]:
        with unavailable_on_error("find unannounced jobs"):
            rows = (
                self._db.connection()
                .execute(_UNANNOUNCED, (*_FINAL, _sortable(updated_before), limit))
                .fetchall()
            )
        return [_decode(r["record"]) for r in rows]

    def find_jobs(self, where: JobFilter, limit: int, after: JobCursor | None = None) -> list[Job]:
        clauses: list[str] = []
        params: list[Any] = []
        for column, value in (
            ("status", where.status.value if where.status else None),
            ("client_id", where.client_id),
            ("assignment_id", where.assignment_id),
        ):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        if where.created_from is not None:
            clauses.append("created_at >= ?")
            params.append(_sortable(where.created_from))
        if where.created_to is not None:
            clauses.append("created_at < ?")
            params.append(_sortable(where.created_to))
        if after is not None:
            clauses.append("(created_at < ? OR (created_at = ? AND id < ?))")
            moment = _sortable(after.created_at)
            params.extend((moment, moment, after.job_id))
        sql = "SELECT record FROM jobs"
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        sql += " ORDER BY created_at DESC, id DESC LIMIT ?"
        with unavailable_on_error("list jobs"):
            rows = self._db.connection().execute(sql, (*params, limit)).fetchall()
        return [_decode(r["record"]) for r in rows]

    def count_by_status(self, cap: int) -> dict[JobStatus, int]:
        counts: dict[JobStatus, int] = {}
        with unavailable_on_error("count jobs"):
            conn = self._db.connection()
            for status in JobStatus:
                row = conn.execute(
                    "SELECT COUNT(*) AS n FROM (SELECT 1 FROM jobs WHERE status = ? LIMIT ?)",
                    (status.value, cap),
                ).fetchone()
                counts[status] = int(row["n"])
        return counts

    def completed_between(self, since: datetime, until: datetime, limit: int) -> list[Job]:
        with unavailable_on_error("find completed jobs"):
            rows = (
                self._db.connection()
                .execute(
                    "SELECT record FROM jobs WHERE completed_at >= ? AND completed_at < ?"
                    " ORDER BY completed_at DESC LIMIT ?",
                    (_sortable(since), _sortable(until), limit),
                )
                .fetchall()
            )
        return [_decode(r["record"]) for r in rows]

    def ping(self) -> None:
        with unavailable_on_error("ping"):
            self._db.connection().execute("SELECT 1 FROM jobs LIMIT 1").fetchall()

    def _write(self, conn: sqlite3.Connection, job: Job, *, insert: bool) -> None:
        text = _encode(job)
        # Remembered as written: the next read of an unchanged record skips decoding. A
        # rollback leaves the file's text different, which is then decoded as usual.
        self._recent.remember(job, text)
        params = (
            job.client_id,
            job.status.value,
            _sortable(job.updated_at),
            int(job.event_published),
            *_listing_values(job),
            text,
            job.id,
        )
        if insert:
            conn.execute(
                "INSERT INTO jobs (client_id, status, updated_at, event_published, created_at,"
                " completed_at, assignment_id, record, id) VALUES (?,?,?,?,?,?,?,?,?)",
                params,
            )
        else:
            conn.execute(
                "UPDATE jobs SET client_id=?, status=?, updated_at=?, event_published=?,"
                " created_at=?, completed_at=?, assignment_id=?, record=? WHERE id=?",
                params,
            )
