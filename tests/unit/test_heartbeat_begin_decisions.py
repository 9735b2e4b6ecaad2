"""When an attempt begins: it is due one heartbeat later, unless the drain's grace is over
(then at once, to be handed back); the timer thread it starts is the daemon "heartbeat";
ending an attempt twice is harmless."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import cast

import pytest

from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.clock import SystemClock
from shared.ports import JobStore
from shared.service_layer.heartbeat import Heartbeat
from tests.unit.test_heartbeat_decisions import heartbeat_on
from tests.unit.test_heartbeat_lease import budget


@pytest.fixture
def store(tmp_path: Path) -> JobStore:
    return SqliteJobStore(SqliteDatabase(tmp_path / "jobs.sqlite3"))


def test_an_attempt_begun_is_due_one_heartbeat_later(store: JobStore) -> None:
    heartbeat = heartbeat_on(store, [100.0])
    assert heartbeat.begin("j", "o").due == 100.0 + budget().heartbeat_s


def test_an_attempt_begun_while_the_drains_grace_runs_is_due_as_usual(store: JobStore) -> None:
    heartbeat = heartbeat_on(store, [100.0])
    assert heartbeat.drain(60.0)
    assert heartbeat.begin("j", "o").due == 100.0 + budget().heartbeat_s


def test_an_attempt_begun_when_the_grace_ends_is_due_at_once(store: JobStore) -> None:
    now = [100.0]
    heartbeat = heartbeat_on(store, now)
    assert heartbeat.drain(5.0)
    now[0] = 105.0  # the grace's very end: it is over
    assert heartbeat.begin("j", "o").due == 105.0


def test_ending_an_attempt_twice_is_harmless(store: JobStore) -> None:
    heartbeat = heartbeat_on(store, [100.0])
    attempt = heartbeat.begin("j", "o")
    first = heartbeat.end(attempt)
    assert heartbeat.end(attempt) is first and heartbeat.in_flight() == []


def test_the_timer_thread_is_the_daemon_named_heartbeat(store: JobStore) -> None:
    heartbeat = Heartbeat(cast(JobStore, store), SystemClock(), budget())
    before = set(threading.enumerate())
    attempt = heartbeat.begin("j", "o")
    try:
        [timer] = set(threading.enumerate()) - before
        assert timer.name == "heartbeat"
        assert timer.daemon  # a stopping worker process is not kept alive by it
    finally:
        heartbeat.end(attempt)
