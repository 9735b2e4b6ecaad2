"""The `tasks` table in the shared SQLite file: the embedded task queue's storage.

`SqliteTaskQueue` (task_queue.py) inserts tasks; the local dispatcher (`localcloud.tasks`)
claims and delivers them with Cloud Tasks semantics. `TaskTable` holds every SQL
statement on the table so both sides share one definition. Times are float seconds since
the epoch.

Deleted and completed tasks stay as tombstones (state `deleted`) for the name reservation
window, so a name cannot be reused for an hour, as with Cloud Tasks queues made via the API.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from typing import Any

from shared.adapters.embedded.sqlite import SqliteDatabase

DEFAULT_NAME_RESERVATION = timedelta(hours=1)
TASK_ID = re.compile(r"^[A-Za-z0-9_-]{1,500}$")
# The retry reason an attempt carries until its outcome is recorded: if the dispatcher
# dies first, the next attempt reports that the lease ran out.
LEASE_EXPIRED = "LEASE_EXPIRED"

SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks (
    queue TEXT NOT NULL,
    name TEXT NOT NULL,
    url TEXT NOT NULL,
    http_method TEXT NOT NULL,
    headers TEXT NOT NULL,
    body BLOB NOT NULL,
    schedule_time REAL NOT NULL,
    created_at REAL NOT NULL,
    dispatch_deadline_s REAL,
    oidc_service_account TEXT,
    oidc_audience TEXT,
    state TEXT NOT NULL,
    dispatch_count INTEGER NOT NULL DEFAULT 0,
    response_count INTEGER NOT NULL DEFAULT 0,
    execution_count INTEGER NOT NULL DEFAULT 0,
    first_attempt_at REAL,
    last_attempt_at REAL,
    last_response_code INTEGER,
    last_retry_reason TEXT,
    lease_owner TEXT,
    lease_until REAL,
    deleted_at REAL,
    delete_reason TEXT,
    PRIMARY KEY (queue, name)
);
CREATE INDEX IF NOT EXISTS tasks_due ON tasks (queue, state, schedule_time);
CREATE TABLE IF NOT EXISTS queue_states (
    queue TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    updated_at REAL NOT NULL
)
"""

#: Added after the table's first release: added to tables made before it.
_LATER_COLUMNS = {"execution_count": "INTEGER NOT NULL DEFAULT 0"}
#: The User-Agent Cloud Tasks stores on an HTTP task (and sends), whatever the task said.
USER_AGENT = "Google-Cloud-Tasks"

#: A queue's states, as Cloud Tasks names them (Queue.State).
RUNNING = "RUNNING"
PAUSED = "PAUSED"


class TaskState(StrEnum):
    PENDING = "pending"
    DELETED = "deleted"  # a tombstone: done, exhausted or deleted; keeps the name reserved


@dataclass(frozen=True)
class NewTask:
    """A task to insert: one HTTP request and when to send it."""

    queue: str
    name: str
    url: str
    body: bytes
    schedule_time: float
    headers: dict[str, str] = field(default_factory=dict)
    http_method: str = "POST"
    dispatch_deadline_s: float | None = None
    oidc_service_account: str | None = None
    oidc_audience: str | None = None


@dataclass(frozen=True)
class TaskRow:
    """One row of the table, as stored before any update made by the read that returned it."""

    queue: str
    name: str
    url: str
    http_method: str
    headers: dict[str, str]
    body: bytes
    schedule_time: float
    created_at: float
    dispatch_deadline_s: float | None
    oidc_service_account: str | None
    oidc_audience: str | None
    state: TaskState
    dispatch_count: int
    #: Attempts that got any response (Task.response_count).
    response_count: int
    #: Attempts answered below 500: Cloud Tasks' X-CloudTasks-TaskExecutionCount.
    execution_count: int
    first_attempt_at: float | None
    last_attempt_at: float | None
    last_response_code: int | None
    last_retry_reason: str | None
    lease_owner: str | None
    lease_until: float | None

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> TaskRow:
        values: dict[str, Any] = {name: row[name] for name in cls.__dataclass_fields__}
        values["headers"] = json.loads(row["headers"])
        values["state"] = TaskState(row["state"])
        return cls(**values)


_P = TaskState.PENDING


_INSERT_NEW = (
    "INSERT INTO tasks (queue, name, url, http_method, headers, body, schedule_time,"
    " created_at, dispatch_deadline_s, oidc_service_account, oidc_audience, state)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (queue, name) DO NOTHING"
)


def stored_headers(headers: dict[str, str]) -> dict[str, str]:
    """A task's headers as Cloud Tasks stores them: its User-Agent replaced by its own."""
    kept = {name: value for name, value in headers.items() if name.lower() != "user-agent"}
    return kept | {"User-Agent": USER_AGENT}


def _executed(status: int | None) -> int:
    """1 if an answer counts as an execution: a response, and not a 5xx."""
    return int(status is not None and status < 500)


def _fence(row: TaskRow, owner: str) -> tuple[str, str, str, int, str]:
    # Only the attempt holding the lease may record an outcome: a later claim (after the
    # lease expired or was released) changed the owner or bumped dispatch_count.
    return (row.queue, row.name, owner, row.dispatch_count + 1, TaskState.PENDING)


class TaskTable:
    """Every statement on the `tasks` table: creation, claims with leases, outcomes."""

    def __init__(self, db: SqliteDatabase) -> None:
        self.db = db
        db.ensure_schema(SCHEMA)
        with db.transaction() as conn:
            columns = {row["name"] for row in conn.execute("PRAGMA table_info(tasks)")}
            for column, kind in _LATER_COLUMNS.items():
                if column not in columns:
                    conn.execute(f"ALTER TABLE tasks ADD COLUMN {column} {kind}")

    @staticmethod
    def insert(conn: sqlite3.Connection, task: NewTask, now: float, reservation_s: float) -> bool:
        """Insert within the caller's transaction; False if the name is taken or reserved."""
        row = (
            task.queue,
            task.name,
            task.url,
            task.http_method,
            json.dumps(stored_headers(task.headers)),
            task.body,
            task.schedule_time,
            now,
            task.dispatch_deadline_s,
            task.oidc_service_account,
            task.oidc_audience,
            TaskState.PENDING,
        )
        # A new name (the usual case) takes this one statement; a name already in the
        # table is looked at only then.
        if conn.execute(_INSERT_NEW, row).rowcount:
            return True
        old = conn.execute(
            "SELECT state, deleted_at FROM tasks WHERE queue = ? AND name = ?",
            (task.queue, task.name),
        ).fetchone()
        if old["state"] == TaskState.PENDING or old["deleted_at"] > now - reservation_s:
            return False
        # A tombstone past its reservation: the name may be used again.
        conn.execute("DELETE FROM tasks WHERE queue = ? AND name = ?", (task.queue, task.name))
        conn.execute(_INSERT_NEW, row)
        return True

    def create(self, task: NewTask, reservation_s: float) -> bool:
        """Insert in a transaction of its own; False if the name is taken or reserved."""
        with self.db.transaction() as conn:
            return self.insert(conn, task, time.time(), reservation_s)

    def get(self, queue: str, name: str) -> TaskRow | None:
        """Return the pending task, or None (unknown, done or deleted)."""
        sql = "SELECT * FROM tasks WHERE queue = ? AND name = ? AND state = ?"
        row = self.db.connection().execute(sql, (queue, name, _P)).fetchone()
        return TaskRow.from_row(row) if row else None

    def tombstoned(self, queue: str, name: str) -> bool:
        """Whether the name belongs to a task done or deleted within the reservation window."""
        sql = "SELECT 1 FROM tasks WHERE queue = ? AND name = ? AND state = ?"
        row = self.db.connection().execute(sql, (queue, name, TaskState.DELETED)).fetchone()
        return row is not None

    def list_pending(self, queue: str, after_name: str, limit: int) -> list[TaskRow]:
        """Pending tasks ordered by name, starting after `after_name` (a page)."""
        sql = "SELECT * FROM tasks WHERE queue = ? AND state = ? AND name > ? ORDER BY name LIMIT ?"
        rows = self.db.connection().execute(sql, (queue, _P, after_name, limit)).fetchall()
        return [TaskRow.from_row(r) for r in rows]

    def delete(self, queue: str, name: str, reason: str) -> bool:
        """Turn a pending task into a tombstone; False if there was none."""
        with self.db.transaction() as conn:
            cur = conn.execute(
                "UPDATE tasks SET state = ?, deleted_at = ?, delete_reason = ?, lease_owner = NULL,"
                " lease_until = NULL WHERE queue = ? AND name = ? AND state = ?",
                (TaskState.DELETED, time.time(), reason, queue, name, _P),
            )
            return cur.rowcount == 1

    def claim_due(
        self,
        queue: str,
        now: float,
        limit: int,
        owner: str,
        default_deadline_s: float,
        lease_margin_s: float,
    ) -> list[TaskRow]:
        """Lease up to `limit` due tasks to `owner`, counting the attempt; return them as before.

        The lease lasts the task's dispatch deadline plus a margin, so a task whose
        dispatcher died is claimed again once its attempt would have timed out anyway.
        """
        with self.db.transaction() as conn:
            rows = conn.execute(
                "SELECT * FROM tasks WHERE queue = ? AND state = ? AND schedule_time <= ?"
                " AND (lease_until IS NULL OR lease_until <= ?)"
                # A paused queue's tasks are not claimed (nor counted as due, below).
                " AND NOT EXISTS (SELECT 1 FROM queue_states s WHERE s.queue = tasks.queue"
                " AND s.state = 'PAUSED') ORDER BY schedule_time LIMIT ?",
                (queue, _P, now, now, limit),
            ).fetchall()
            conn.executemany(
                "UPDATE tasks SET dispatch_count = dispatch_count + 1,"
                " first_attempt_at = COALESCE(first_attempt_at, ?), last_attempt_at = ?,"
                " last_response_code = NULL, last_retry_reason = ?, lease_owner = ?,"
                " lease_until = ? + COALESCE(dispatch_deadline_s, ?) + ?"
                " WHERE queue = ? AND name = ?",
                [
                    (
                        now,
                        now,
                        LEASE_EXPIRED,
                        owner,
                        now,
                        default_deadline_s,
                        lease_margin_s,
                        queue,
                        row["name"],
                    )
                    for row in rows
                ],
            )
        return [TaskRow.from_row(r) for r in rows]

    def next_due(self, queue: str) -> float | None:
        """When the earliest pending task becomes claimable, or None when there is none."""
        sql = (
            "SELECT MIN(MAX(schedule_time, COALESCE(lease_until, 0))) FROM tasks"
            " WHERE queue = ? AND state = ? AND NOT EXISTS (SELECT 1 FROM queue_states s"
            " WHERE s.queue = tasks.queue AND s.state = 'PAUSED')"
        )
        value = self.db.connection().execute(sql, (queue, _P)).fetchone()[0]
        return float(value) if value is not None else None

    def finish(self, row: TaskRow, owner: str, status: int | None, reason: str, now: float) -> bool:
        """Tombstone a leased task after its attempt (success or no retries left).

        `status` is the attempt's HTTP status, None when it got no response.
        """
        with self.db.transaction() as conn:
            cur = conn.execute(
                "UPDATE tasks SET state = ?, deleted_at = ?, delete_reason = ?,"
                " response_count = response_count + ?, execution_count = execution_count + ?,"
                " lease_owner = NULL, lease_until = NULL"
                " WHERE queue = ? AND name = ? AND lease_owner = ? AND dispatch_count = ?"
                " AND state = ?",
                (
                    TaskState.DELETED,
                    now,
                    reason,
                    int(status is not None),
                    _executed(status),
                    *_fence(row, owner),
                ),
            )
            return cur.rowcount == 1

    def retry_later(
        self, row: TaskRow, owner: str, status: int | None, reason: str, at: float
    ) -> bool:
        """Record a failed attempt of a leased task and schedule the next one at `at`."""
        with self.db.transaction() as conn:
            cur = conn.execute(
                "UPDATE tasks SET schedule_time = ?, last_response_code = ?,"
                " last_retry_reason = ?, response_count = response_count + ?,"
                " execution_count = execution_count + ?,"
                " lease_owner = NULL, lease_until = NULL WHERE queue = ? AND name = ?"
                " AND lease_owner = ? AND dispatch_count = ? AND state = ?",
                (
                    at,
                    status,
                    reason,
                    int(status is not None),
                    _executed(status),
                    *_fence(row, owner),
                ),
            )
            return cur.rowcount == 1

    def release(self, owner: str | None, reason: str) -> int:
        """Make tasks leased by `owner` (None: by anyone) claimable again at once."""
        with self.db.transaction() as conn:
            cur = conn.execute(
                "UPDATE tasks SET lease_owner = NULL, lease_until = NULL, last_retry_reason = ?"
                " WHERE state = ? AND lease_owner IS NOT NULL AND (? IS NULL OR lease_owner = ?)",
                (reason, _P, owner, owner),
            )
            return cur.rowcount

    # --- queue states (PauseQueue, ResumeQueue, PurgeQueue) -----------------------------

    def set_state(self, queue: str, state: str) -> None:
        """Mark the queue RUNNING or PAUSED (a paused queue keeps accepting tasks)."""
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO queue_states (queue, state, updated_at) VALUES (?, ?, ?)"
                " ON CONFLICT (queue) DO UPDATE SET state = excluded.state,"
                " updated_at = excluded.updated_at",
                (queue, state, time.time()),
            )

    def state(self, queue: str) -> str:
        """RUNNING or PAUSED (a queue never paused is RUNNING)."""
        sql = "SELECT state FROM queue_states WHERE queue = ?"
        row = self.db.connection().execute(sql, (queue,)).fetchone()
        return str(row["state"]) if row else RUNNING

    def purge(self, queue: str, reason: str = "purged") -> int:
        """Delete every pending task of the queue (tombstones keep the names reserved)."""
        with self.db.transaction() as conn:
            cur = conn.execute(
                "UPDATE tasks SET state = ?, deleted_at = ?, delete_reason = ?, lease_owner = NULL,"
                " lease_until = NULL WHERE queue = ? AND state = ?",
                (TaskState.DELETED, time.time(), reason, queue, _P),
            )
            return cur.rowcount

    def count_pending(self, queue: str) -> int:
        """How many tasks the queue holds."""
        sql = "SELECT COUNT(*) FROM tasks WHERE queue = ? AND state = ?"
        return int(self.db.connection().execute(sql, (queue, _P)).fetchone()[0])

    def purge_tombstones(self, queue: str, before: float) -> int:
        """Forget tombstones older than the reservation window, freeing their names."""
        with self.db.transaction() as conn:
            cur = conn.execute(
                "DELETE FROM tasks WHERE queue = ? AND state = ? AND deleted_at < ?",
                (queue, TaskState.DELETED, before),
            )
            return cur.rowcount
