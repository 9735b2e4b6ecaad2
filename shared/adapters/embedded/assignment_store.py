"""Assignments, their rounds' tallies and AssignmentGraded records on the shared SQLite file.

The tallies are moved by the job store inside the transaction that writes the job
(`SqliteTally.record`), so a job's status and its assignment's counts commit together.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.sqlite import SqliteDatabase, unavailable_on_error
from shared.domain.admission import ActiveCounts, AdmissionLimits
from shared.domain.assignment import Assignment, Tally, tally_change
from shared.domain.client_ids import USER_SCOPE_MARK
from shared.domain.errors import AssignmentNotFound, GradeqError
from shared.domain.events import AssignmentGraded
from shared.domain.job import Job
from shared.ports import BatchCreated

SCHEMA = """
CREATE TABLE IF NOT EXISTS assignments (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    created_at TEXT NOT NULL,
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS assignments_client_created
    ON assignments (client_id, created_at DESC, id DESC);
CREATE TABLE IF NOT EXISTS assignment_tallies (
    assignment_id TEXT NOT NULL,
    round INTEGER NOT NULL,
    field TEXT NOT NULL,
    value REAL NOT NULL,
    PRIMARY KEY (assignment_id, round, field)
);
CREATE TABLE IF NOT EXISTS assignment_graded (
    event_id TEXT PRIMARY KEY,
    published INTEGER NOT NULL DEFAULT 0,
    recorded_at TEXT NOT NULL,
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS assignment_graded_unpublished
    ON assignment_graded (published, recorded_at);
CREATE INDEX IF NOT EXISTS assignments_regrade_waiting
    ON assignments (json_extract(record, '$.regrade_waiting'))
"""

_DATETIMES = ("created_at", "updated_at")


def _sortable(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def _encode(assignment: Assignment) -> str:
    record = assignment.to_record()
    for key in _DATETIMES:
        record[key] = record[key].isoformat()
    for rubric in record["rubrics"]:
        rubric["created_at"] = rubric["created_at"].isoformat()
    return json.dumps(record, separators=(",", ":"))


def _decode(text: str) -> Assignment:
    record: dict[str, Any] = json.loads(text)
    for key in _DATETIMES:
        record[key] = datetime.fromisoformat(record[key])
    for rubric in record["rubrics"]:
        rubric["created_at"] = datetime.fromisoformat(rubric["created_at"])
    return Assignment.from_record(record)


class SqliteTally:
    """Moves an assignment round's counters inside the job store's write transaction."""

    def __init__(self, db: SqliteDatabase) -> None:
        db.ensure_schema(SCHEMA)

    def record(self, conn: sqlite3.Connection, before: Job | None, after: Job) -> None:
        change = tally_change(before, after)
        if change is None:
            return
        conn.executemany(
            "INSERT INTO assignment_tallies (assignment_id, round, field, value)"
            " VALUES (?, ?, ?, ?) ON CONFLICT (assignment_id, round, field)"
            " DO UPDATE SET value = value + excluded.value",
            [(change.assignment_id, change.round, f, d) for f, d in change.deltas.items()],
        )


class SqliteAssignmentStore:
    """The AssignmentStore port on the shared SQLite file."""

    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db
        db.ensure_schema(SCHEMA)

    def create(self, assignment: Assignment) -> tuple[Assignment, bool]:
        with unavailable_on_error("create assignment"), self._db.transaction() as conn:
            row = conn.execute(
                "SELECT record FROM assignments WHERE id = ?", (assignment.id,)
            ).fetchone()
            if row is not None:
                return _decode(row["record"]), False
            conn.execute(
                "INSERT INTO assignments (id, client_id, created_at, record) VALUES (?,?,?,?)",
                (
                    assignment.id,
                    assignment.client_id,
                    _sortable(assignment.created_at),
                    _encode(assignment),
                ),
            )
        return assignment, True

    def get(self, assignment_id: str) -> Assignment | None:
        with unavailable_on_error("read assignment"):
            row = (
                self._db.connection()
                .execute("SELECT record FROM assignments WHERE id = ?", (assignment_id,))
                .fetchone()
            )
        return _decode(row["record"]) if row else None

    def list_of(
        self, client_id: str, limit: int, after: tuple[datetime, str] | None = None
    ) -> list[Assignment]:
        # The school's, and those its users made in their scope before objects had an
        # author (client id `<school>:user:<uid>`, kept in the column): a range of the index.
        legacy = client_id + USER_SCOPE_MARK
        sql = (
            "SELECT record FROM assignments"
            " WHERE (client_id = ? OR (client_id >= ? AND client_id < ?))"
        )
        params: list[Any] = [client_id, legacy, legacy[:-1] + chr(ord(legacy[-1]) + 1)]
        if after is not None:
            sql += " AND (created_at, id) < (?, ?)"
            params.extend((_sortable(after[0]), after[1]))
        sql += " ORDER BY created_at DESC, id DESC LIMIT ?"
        with unavailable_on_error("list assignments"):
            rows = self._db.connection().execute(sql, (*params, limit)).fetchall()
        return [_decode(r["record"]) for r in rows]

    def update(self, assignment_id: str, mutate: Callable[[Assignment], Assignment]) -> Assignment:
        with unavailable_on_error("update assignment"), self._db.transaction() as conn:
            row = conn.execute(
                "SELECT record FROM assignments WHERE id = ?", (assignment_id,)
            ).fetchone()
            if row is None:
                raise AssignmentNotFound(f"no assignment {assignment_id}")
            updated = mutate(_decode(row["record"]))
            conn.execute(
                "UPDATE assignments SET record = ? WHERE id = ?", (_encode(updated), assignment_id)
            )
        return updated

    def tally(self, assignment_id: str, round_: int) -> Tally:
        with unavailable_on_error("read tally"):
            rows = (
                self._db.connection()
                .execute(
                    "SELECT field, value FROM assignment_tallies"
                    " WHERE assignment_id = ? AND round = ?",
                    (assignment_id, round_),
                )
                .fetchall()
            )
        return Tally.from_fields({r["field"]: r["value"] for r in rows})

    def record_graded(self, event: AssignmentGraded) -> bool:
        record = {"occurred_at": event.occurred_at.isoformat(), "data": event.data()}
        with unavailable_on_error("record assignment graded"), self._db.transaction() as conn:
            cursor = conn.execute(
                "INSERT OR IGNORE INTO assignment_graded (event_id, recorded_at, record)"
                " VALUES (?, ?, ?)",
                (event.event_id, _sortable(event.occurred_at), json.dumps(record)),
            )
            return cursor.rowcount == 1

    def mark_graded_published(self, event_id: str) -> None:
        with unavailable_on_error("mark assignment graded"), self._db.transaction() as conn:
            conn.execute(
                "UPDATE assignment_graded SET published = 1 WHERE event_id = ?", (event_id,)
            )

    def waiting_regrades(self, limit: int) -> list[Assignment]:
        with unavailable_on_error("find waiting regrades"):
            rows = (
                self._db.connection()
                .execute(
                    "SELECT record FROM assignments"
                    " WHERE json_extract(record, '$.regrade_waiting') = 1 LIMIT ?",
                    (limit,),
                )
                .fetchall()
            )
        return [_decode(r["record"]) for r in rows]

    def unpublished_graded(self, limit: int) -> list[AssignmentGraded]:
        with unavailable_on_error("find unpublished assignment events"):
            rows = (
                self._db.connection()
                .execute(
                    "SELECT event_id, record FROM assignment_graded WHERE published = 0"
                    " ORDER BY recorded_at LIMIT ?",
                    (limit,),
                )
                .fetchall()
            )
        events = []
        for row in rows:
            record = json.loads(row["record"])
            occurred_at = datetime.fromisoformat(record["occurred_at"])
            events.append(AssignmentGraded.from_data(row["event_id"], occurred_at, record["data"]))
        return events

    def ping(self) -> None:
        with unavailable_on_error("ping"):
            self._db.connection().execute("SELECT 1 FROM assignments LIMIT 1").fetchall()


class SqliteJobBatch:
    """Creates a batch of jobs in one SQLite transaction through the job store."""

    def __init__(self, db: SqliteDatabase, store: SqliteJobStore) -> None:
        self._db = db
        self._store = store

    def create_many(self, jobs: list[Job], limits: AdmissionLimits | None = None) -> BatchCreated:
        items: list[tuple[Job | None, bool]] = []
        refusal: GradeqError | None = None
        # The job store's own writes join this transaction: one commit for the batch. The
        # counts are read inside it (BEGIN IMMEDIATE, no other writer in between), so the
        # room they leave is the room the jobs are counted into.
        with unavailable_on_error("create jobs"), self._db.transaction() as conn:
            counts = SqliteJobStore.counts_in(conn, jobs[0].client_id) if jobs else None
            made = 0
            for job in jobs:
                if limits is not None and counts is not None:
                    now = ActiveCounts(counts.client + made, counts.total + made)
                    if limits.room(now) == 0:
                        existing = self._store.get(job.id)  # a retry is never refused
                        if existing is None:
                            refusal = refusal or limits.refusal(now)
                        items.append((existing, False))
                        continue
                stored, created = self._store.create(job)
                made += created
                items.append((stored, created))
        return BatchCreated(items, refusal)
