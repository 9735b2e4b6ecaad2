"""The SQLite job store's decisions: the counts it answers per client, and an unreadable
store reported as unavailable, naming what failed."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.clock import FrozenClock
from shared.domain.errors import DependencyUnavailable
from shared.domain.job import GradingRequest, Job

CLOCK = FrozenClock()
REQUEST = GradingRequest("s", "an answer", ("c1",), 1)


def new_job(job_id: str, client_id: str) -> Job:
    return Job.new(job_id, client_id, REQUEST, "fp", CLOCK.now())


def test_the_active_jobs_of_a_client_are_its_own(tmp_path: Path) -> None:
    store = SqliteJobStore(SqliteDatabase(tmp_path / "j.db"))
    store.create(new_job("job-1", "client-a"))
    store.create(new_job("job-2", "client-a"))
    store.create(new_job("job-3", "client-b"))
    assert store.active_jobs_of("client-a") == 2
    assert store.active_jobs_of("client-b") == 1
    assert store.active_jobs_of("client-c") == 0


def test_a_ping_of_an_unreadable_store_is_unavailable_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    store = SqliteJobStore(SqliteDatabase(path))
    store.ping()
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("DROP TABLE jobs")
    other.close()
    with pytest.raises(DependencyUnavailable) as raised:
        store.ping()
    assert raised.value.detail == "embedded store: ping failed: no such table: jobs"
