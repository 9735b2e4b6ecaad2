"""Apps built through their factories on a temporary SQLite file and recording fakes.

The subscriber apps' tests share `processed`; the dispatcher tests share `db` (a SQLite
file) and `target` (a recording HTTP server); the tests of OpenAI-compatible graders share
`openai_clients`.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import openai
import pytest

from shared.adapters.embedded.api_key_store import SqliteApiKeyStore
from shared.adapters.embedded.assignment_store import (
    SqliteAssignmentStore,
    SqliteJobBatch,
    SqliteTally,
)
from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.processed_events import SqliteProcessedEvents
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.api_keys import ApiKey
from tests.fakes import FakePublisher, FakeTaskQueue
from tests.support.http_target import RecordingTarget

KEY_TIME = datetime(2025, 1, 1, tzinfo=UTC)
API_KEY, _KEY_A = ApiKey.issue("client-a", KEY_TIME, key_id="clienta", secret="s" * 43)
OTHER_KEY, _KEY_B = ApiKey.issue("client-b", KEY_TIME, key_id="clientb", secret="t" * 43)
PUSH_TOKEN = "local-push-secret"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings on a fresh SQLite file whose key store holds API_KEY and OTHER_KEY."""
    settings = Settings(
        data_dir=tmp_path,
        push_token=PUSH_TOKEN,  # type: ignore[arg-type]
        grader_timeout_s=5,
        lease_s=1,
        heartbeat_s=0.3,
    )
    keys = SqliteApiKeyStore(SqliteDatabase(settings.database_path))
    keys.add(_KEY_A)
    keys.add(_KEY_B)
    return settings


@pytest.fixture
def adapters(settings: Settings) -> Adapters:
    db = SqliteDatabase(settings.database_path)
    jobs = SqliteJobStore(db, on_write=SqliteTally(db).record)
    return Adapters(
        store=jobs,
        queue=FakeTaskQueue(),
        publisher=FakePublisher(),
        assignments=SqliteAssignmentStore(db),
        batch=SqliteJobBatch(db, jobs),
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


@pytest.fixture
def openai_clients(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[openai.OpenAI]]:
    """Every OpenAI SDK client built during the test, closed when it ends.

    A worker keeps its grader's client for the life of the process; a test's would keep a
    pooled connection open until the garbage collector finalizes its socket, at a moment no
    test chooses, where the unclosed socket's ResourceWarning fails whatever runs then.
    """
    built: list[openai.OpenAI] = []

    class Closed(openai.OpenAI):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            built.append(self)

    monkeypatch.setattr(openai, "OpenAI", Closed)
    yield built
    for client in built:
        client.close()
