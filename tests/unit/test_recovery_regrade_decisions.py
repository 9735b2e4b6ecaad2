"""What the recovery sweep does besides jobs, pinned: it resumes the regrades waiting for
room under the ceilings once per sweep, and a failure there waits for the next sweep."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.clock import FrozenClock
from shared.config.budget import Budget
from shared.config.queues import load_queues
from shared.domain.errors import DependencyUnavailable
from shared.service_layer.recovery import RecoveryService
from tests.fakes import FakePublisher, FakeTaskQueue


def _sweeper(tmp_path: Path, regrades: Callable[[], object]) -> RecoveryService:
    budget = Budget(
        grader_timeout_s=300,
        lease_s=12.0,
        heartbeat_s=4,
        result_write_retry_s=10,
        drain_grace_s=5,
        job_max_attempts=4,
        queue=load_queues()["grading"],
    ).check()
    return RecoveryService(
        SqliteJobStore(SqliteDatabase(tmp_path / "jobs.sqlite3")),
        FakeTaskQueue(),
        FakePublisher(),
        FrozenClock(),
        budget,
        regrades=regrades,
    )


def test_every_sweep_resumes_the_waiting_regrades_once(tmp_path: Path) -> None:
    calls: list[str] = []
    sweeper = _sweeper(tmp_path, lambda: calls.append("resume"))

    report = sweeper.sweep()
    assert calls == ["resume"]
    assert report.as_dict() == {"replayed": [], "failed": [], "announced": [], "errors": []}
    sweeper.sweep()
    assert calls == ["resume", "resume"]


def test_regrades_that_cannot_resume_now_wait_for_the_next_sweep(tmp_path: Path) -> None:
    calls: list[int] = []

    def resume() -> None:
        calls.append(1)
        raise DependencyUnavailable("the queue is down")

    sweeper = _sweeper(tmp_path, resume)

    assert sweeper.sweep().errors == []
    assert sweeper.sweep().errors == []
    assert calls == [1, 1]
