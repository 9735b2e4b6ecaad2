"""A busy embedded store: requests wait at most GRADEQ_STORE_WAIT_S, then answer 503."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from services.intake.app import create_app as create_intake
from services.worker.app import create_app as create_worker
from shared.adapters.embedded.api_key_store import SqliteApiKeyStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.bootstrap import build_adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.api_keys import ApiKey
from tests.fakes import ScriptedGrader

WAIT_S = 0.3
API_KEY, STORED_KEY = ApiKey.issue("client-a", datetime(2026, 1, 1, tzinfo=UTC))
PUSH_TOKEN = "local-push-secret"


@contextmanager
def write_locked(database: Path) -> Iterator[None]:
    """Hold the database's write lock from another connection, as a stuck writer would."""
    conn = sqlite3.connect(database, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        conn.execute("ROLLBACK")
        conn.close()


def test_a_locked_store_gives_503_with_retry_after_within_the_wait(tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path,
        push_token=PUSH_TOKEN,  # type: ignore[arg-type]
        store_wait_s=WAIT_S,
    )
    SqliteApiKeyStore(SqliteDatabase(settings.database_path)).add(STORED_KEY)
    clock = FrozenClock()
    intake = create_intake(settings, build_adapters(settings), clock).test_client()
    worker = create_worker(settings, build_adapters(settings), ScriptedGrader(), clock)
    headers = {"Authorization": f"Bearer {API_KEY}", "Idempotency-Key": "busy"}
    body = {"submission_id": "s", "answer": "a", "rubric": "r"}
    with write_locked(settings.database_path):
        begun = time.monotonic()
        response = intake.post("/v1/grading-jobs", json=body, headers=headers)
        waited = time.monotonic() - begun
        delivery = worker.test_client().post(
            "/tasks/grade",
            json={"job_id": "x"},
            headers={"Authorization": f"Bearer {PUSH_TOKEN}"},
        )
    assert response.status_code == 503
    assert response.mimetype == "application/problem+json"
    assert response.headers["Retry-After"] == str(settings.retry_after_s)
    # Far below the 30 s that used to block every intake thread.
    assert waited < WAIT_S + 5
    assert delivery.status_code == 503 and "Retry-After" in delivery.headers
    # Once the lock is gone the same request goes through.
    assert intake.post("/v1/grading-jobs", json=body, headers=headers).status_code == 202
