"""Fairness in the shared queue: one client's burst does not starve another's jobs.

Client A submits 500 jobs, then client B submits 5. The intake schedules a client's n-th
job not yet final n dispatch slots ahead (1 / the queue's max_dispatches_per_second), and
the queue dispatches due tasks in schedule_time order - the local dispatcher's claim
below, Cloud Tasks in production. The bound stated and checked: B's first job is among
the first 2 tasks the queue can start, so at the queue's rate R it starts within 2/R
seconds (0.1 s at the grading queue's 20/s), whatever A queued before it; all 5 of B's
jobs start within 10/R.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.adapters.embedded.task_queue import SqliteTaskQueue
from shared.clock import FrozenClock
from shared.config.queues import load_queues
from shared.config.settings import Settings
from shared.domain.ids import job_id_for, task_name_for
from shared.domain.job import GradingRequest
from shared.service_layer.intake import IntakeService
from tests.fakes import FakePublisher

REQUEST = GradingRequest(submission_id="s", answer="a", rubric="r")


def dispatch_order(spacing: timedelta, tmp_path: Path) -> tuple[list[str], float]:
    """Submit A's burst then B's jobs; return the task names the queue starts in its first
    12 dispatch slots (one task per slot of 1/R seconds), and R."""
    db = SqliteDatabase(tmp_path / "fair.sqlite3")
    queue_config = load_queues()["grading"]
    queue = SqliteTaskQueue(db, queue_config, "http://127.0.0.1:9/tasks/grade")
    t0 = datetime.fromtimestamp(time.time(), UTC)
    service = IntakeService(
        SqliteJobStore(db), queue, FakePublisher(), FrozenClock(t0), fair_spacing=spacing
    )
    for i in range(500):
        service.submit("client-a", f"a-{i}", REQUEST)
    for i in range(5):
        service.submit("client-b", f"b-{i}", REQUEST)
    rate = queue_config.rate_limits.max_dispatches_per_second
    started: list[str] = []
    # The dispatcher's own claim, one dispatch slot (1/R) at a time, at R tasks a second.
    for slot in range(12):
        now = t0.timestamp() + slot / rate + 1e-6
        rows = queue.table.claim_due(queue_config.name, now, 1, "test", 600, 30)
        started.extend(row.name for row in rows)
    return started, rate


#: The task names of B's jobs (a task name derives from the job, its id from the key).
B_TASKS = {task_name_for(job_id_for("client-b", f"b-{i}"), 0) for i in range(5)}


def clients_in_start_order(started: list[str]) -> list[str]:
    return ["b" if name in B_TASKS else "a" for name in started]


def test_a_burst_does_not_starve_another_clients_first_job(tmp_path: Path) -> None:
    spacing = Settings().fair_spacing()
    started, rate = dispatch_order(spacing, tmp_path)
    order = clients_in_start_order(started)
    first_b = order.index("b")
    assert first_b <= 1  # started within 2/R seconds of B's submission
    b_slots = [i for i, who in enumerate(order) if who == "b"]
    assert len(b_slots) == 5 and b_slots[-1] < 10  # all of B's within 10/R
    assert spacing == timedelta(seconds=1 / rate)


def test_without_spacing_the_same_burst_starves_the_other_client(tmp_path: Path) -> None:
    started, _ = dispatch_order(timedelta(0), tmp_path)
    assert "b" not in clients_in_start_order(started)  # B waits behind all 500
