"""Each contract fixture is parametrized by adapter family: the same tests run on both.

The "google" fixtures (tests/google_fixtures.py) start the official emulators and skip,
naming what is missing, where java or the emulator jars are absent.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.adapters.embedded.task_queue import SqliteTaskQueue
from shared.config.queues import load_queues
from shared.ports import JobStore
from tests.contract.harness import TargetHarness, TaskQueueHarness, running_dispatcher
from tests.support.http_target import RecordingTarget


@pytest.fixture(params=["embedded", "google"])
def job_store(request: pytest.FixtureRequest, tmp_path: Path) -> JobStore:
    """A JobStore: SQLite, or Firestore on the official emulator."""
    if request.param == "embedded":
        return SqliteJobStore(SqliteDatabase(tmp_path / "jobs.sqlite3"))
    store: JobStore = request.getfixturevalue("firestore_job_store")
    return store


# --- task_queue ----------------------------------------------------------------------


@pytest.fixture(params=["embedded", "google"])
def task_queue_harness(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[TaskQueueHarness]:
    """A TaskQueue delivering to a recording target: SQLite + dispatcher, or Cloud Tasks API."""
    if request.param == "google":
        google: TaskQueueHarness = request.getfixturevalue("google_task_queue_harness")
        yield google
        return
    db = SqliteDatabase(tmp_path / "tasks.sqlite3")
    lanes = load_queues()
    queue = lanes["grading"]
    with RecordingTarget() as target, running_dispatcher(db, queue):
        adapter = SqliteTaskQueue(db, queue, target.url + queue.target_path, lanes=lanes)
        yield TargetHarness(adapter, target)


# --- event_bus_harness, processed_events ----------------------------------------------


@pytest.fixture(params=["embedded", "google"])
def event_bus_harness(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """An EventPublisher and what reached a subscription: SQLite outbox, or Pub/Sub emulator."""
    from tests.contract.harness_events import EmbeddedEventBusHarness

    if request.param == "google":
        return request.getfixturevalue("google_event_bus_harness")
    return EmbeddedEventBusHarness.on(SqliteDatabase(tmp_path / "events.sqlite3"))


@pytest.fixture(params=["embedded", "google"])
def processed_events(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """ProcessedEvents: SQLite, or Firestore on the official emulator."""
    from shared.adapters.embedded.processed_events import SqliteProcessedEvents

    if request.param == "google":
        return request.getfixturevalue("google_processed_events")
    return SqliteProcessedEvents(SqliteDatabase(tmp_path / "processed.sqlite3"))


@pytest.fixture(params=["embedded", "google"])
def api_key_store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """ApiKeyStore: SQLite, or Firestore on the official emulator."""
    from shared.adapters.embedded.api_key_store import SqliteApiKeyStore

    if request.param == "google":
        return request.getfixturevalue("google_api_key_store")
    return SqliteApiKeyStore(SqliteDatabase(tmp_path / "keys.sqlite3"))
