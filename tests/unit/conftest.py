"""Apps built through their factories on a temporary SQLite file and recording fakes.

The subscriber apps' tests share `processed`; the dispatcher tests share `db` (a SQLite
file) and `target` (a recording HTTP server).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.processed_events import SqliteProcessedEvents
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from tests.fakes import FakePublisher, FakeTaskQueue
from tests.support.http_target import RecordingTarget

API_KEY = "key-of-client-a"
OTHER_KEY = "key-of-client-b"
PUSH_TOKEN = "local-push-secret"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(
        data_dir=tmp_path,
        client_keys=f"client-a={API_KEY},client-b={OTHER_KEY}",  # type: ignore[arg-type]
        push_token=PUSH_TOKEN,  # type: ignore[arg-type]
        grader_timeout_s=5,
        lease_s=1,
        heartbeat_s=0.3,
    )


@pytest.fixture
def adapters(settings: Settings) -> Adapters:
    return Adapters(
        store=SqliteJobStore(SqliteDatabase(settings.database_path)),
        queue=FakeTaskQueue(),
        publisher=FakePublisher(),
    )


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
def processed(settings: Settings) -> SqliteProcessedEvents:
    """The subscriber apps' processed-events store, in the settings' database."""
    return SqliteProcessedEvents(SqliteDatabase(settings.database_path))


# --- the dispatcher tests --------------------------------------------------------------


@pytest.fixture
def db(tmp_path: Path) -> SqliteDatabase:
    """A SQLite file for the dispatcher's task table."""
    return SqliteDatabase(tmp_path / "gradeq.sqlite3")


@pytest.fixture
def target() -> Iterator[RecordingTarget]:
    """A recording HTTP target answering 200."""
    with RecordingTarget() as t:
        yield t
