"""Apps built through their factories on a temporary SQLite file and recording fakes."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.settings import Settings
from tests.fakes import FakeProcessedEvents, FakePublisher, FakeTaskQueue

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
        lease_margin_s=5,
    )


@pytest.fixture
def adapters(settings: Settings) -> Adapters:
    return Adapters(
        store=SqliteJobStore(SqliteDatabase(settings.database_path)),
        queue=FakeTaskQueue(),
        publisher=FakePublisher(),
        processed=FakeProcessedEvents(),
    )


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()
