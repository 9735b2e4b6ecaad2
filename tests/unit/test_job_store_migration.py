"""A jobs table made before `event_published` had its own column is migrated in place."""

from __future__ import annotations

import dataclasses
import sqlite3
from datetime import timedelta
from pathlib import Path

from shared.adapters.embedded.job_store import SqliteJobStore, _encode, _sortable
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.clock import FrozenClock
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest, Job
from shared.domain.status import JobStatus
from shared.ports import JobFilter

OLD_SCHEMA = """
CREATE TABLE jobs (
    id TEXT PRIMARY KEY, client_id TEXT NOT NULL, status TEXT NOT NULL,
    updated_at TEXT NOT NULL, record TEXT NOT NULL
)
"""


def test_an_old_table_gets_the_column_filled_from_each_record(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    now = FrozenClock().now()
    request = GradingRequest(submission_id="s", answer="a", rubric="r")
    done = dataclasses.replace(
        Job.new("done", "c", request, "fp", now),
        status=JobStatus.SUCCEEDED,
        result=GradeResult(1, 10, "ok"),
        completed_at=now,
    )
    announced = dataclasses.replace(done, id="announced", event_published=True)
    with sqlite3.connect(path) as conn:
        conn.execute(OLD_SCHEMA)
        for job in (done, announced):
            conn.execute(
                "INSERT INTO jobs VALUES (?, ?, ?, ?, ?)",
                (job.id, job.client_id, job.status.value, _sortable(job.updated_at), _encode(job)),
            )
    store = SqliteJobStore(SqliteDatabase(path))
    found = store.find_unannounced(now + timedelta(minutes=1), limit=10)
    assert [j.id for j in found] == ["done"]
    SqliteJobStore(SqliteDatabase(path))  # a second start finds the column in place


def test_an_old_table_gets_the_listing_columns_filled_from_each_record(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    now = FrozenClock().now()
    request = GradingRequest(submission_id="s", answer="a", rubric="r", assignment_id="hw-9")
    waiting = Job.new("waiting", "c", request, "fp", now)
    done = dataclasses.replace(
        Job.new("done", "c", request, "fp", now + timedelta(minutes=1)),
        status=JobStatus.SUCCEEDED,
        result=GradeResult(1, 10, "ok"),
        completed_at=now + timedelta(minutes=2),
    )
    with sqlite3.connect(path) as conn:
        conn.execute(OLD_SCHEMA)
        for job in (waiting, done):
            conn.execute(
                "INSERT INTO jobs VALUES (?, ?, ?, ?, ?)",
                (job.id, job.client_id, job.status.value, _sortable(job.updated_at), _encode(job)),
            )
    store = SqliteJobStore(SqliteDatabase(path))
    listed = store.find_jobs(JobFilter(assignment_id="hw-9"), limit=10)
    assert [j.id for j in listed] == ["done", "waiting"]
    window = store.completed_between(now, now + timedelta(minutes=3), limit=10)
    assert [j.id for j in window] == ["done"]
    SqliteJobStore(SqliteDatabase(path))  # a second start finds the columns in place
    assert len(store.find_jobs(JobFilter(), limit=10)) == 2


def test_counters_seeded_from_old_jobs_count_user_scopes_as_their_client(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    now = FrozenClock().now()
    request = GradingRequest(submission_id="s", answer="a", rubric="r")
    store = SqliteJobStore(SqliteDatabase(path))
    for n, client in enumerate(["c", "c:user:u1", "c:user:u2", "d"]):
        store.create(Job.new(f"j{n}", client, request, "fp", now))
    # As if the database predated the counters.
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM job_counters")
    seeded = SqliteJobStore(SqliteDatabase(path))
    assert seeded.active_counts("c").client == 3
    assert seeded.active_counts("c:user:u1").client == 3
    assert seeded.active_counts("d").client == 1
