"""Tasks outlive dispatchers: pending ones wait in the table, leased ones come back."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.adapters.embedded.task_queue import SqliteTaskQueue
from shared.adapters.embedded.task_table import SCHEMA, TaskState, TaskTable
from shared.ports import TaskSpec
from tests.contract.harness import eventually, fast_queue, running_dispatcher
from tests.support.http_target import RecordingTarget, Reply


def state_of(db: SqliteDatabase, name: str) -> str:
    row = db.connection().execute("SELECT state FROM tasks WHERE name = ?", (name,)).fetchone()
    return str(row["state"])


def test_pending_tasks_are_delivered_by_the_next_dispatcher(
    db: SqliteDatabase, target: RecordingTarget
) -> None:
    queue = fast_queue()
    tq = SqliteTaskQueue(db, queue, target.url)
    soon = datetime.now(UTC) + timedelta(seconds=0.3)
    for i in range(3):
        tq.enqueue(TaskSpec(name=f"t-{i}", job_id=f"job-{i}", schedule_time=soon))
    with running_dispatcher(db, queue):
        pass  # stopped before anything was due
    assert target.requests == []
    with running_dispatcher(db, queue):  # a new dispatcher, same file
        received = target.wait_for(3, timeout=3)
        time.sleep(0.1)
    assert sorted(r.json["job_id"] for r in target.requests) == ["job-0", "job-1", "job-2"]
    assert {r.header("X-CloudTasks-TaskRetryCount") for r in received} == {"0"}


def test_attempt_abandoned_at_shutdown_is_resent_by_the_next_dispatcher(
    db: SqliteDatabase, target: RecordingTarget
) -> None:
    target.responder = lambda r: Reply(200, delay_s=1.5 if len(target.requests) == 1 else 0)
    queue = fast_queue(deadline_s=5)
    SqliteTaskQueue(db, queue, target.url).enqueue(TaskSpec(name="t-cut", job_id="job-cut"))
    with running_dispatcher(db, queue, grace_s=0.1):
        target.wait_for(1, timeout=3)
    started = time.monotonic()
    with running_dispatcher(db, queue):
        _, second = target.wait_for(2, timeout=3)
        assert time.monotonic() - started < 1.0  # no wait for the 5 s lease
        eventually(lambda: state_of(db, "t-cut") == TaskState.DELETED)
    assert second.header("X-CloudTasks-TaskRetryCount") == "1"
    assert second.header("X-CloudTasks-TaskPreviousResponse") == "0"
    assert second.header("X-CloudTasks-TaskRetryReason") == ""  # empty on HTTP targets


def test_lease_of_a_dead_dispatcher_expires_and_the_task_is_resent(
    db: SqliteDatabase, target: RecordingTarget
) -> None:
    queue = fast_queue()
    SqliteTaskQueue(db, queue, target.url).enqueue(TaskSpec(name="t-orphan", job_id="job-o"))
    claimed_at = time.monotonic()
    (claimed,) = TaskTable(db).claim_due("grading", time.time(), 10, "dead", 0.4, 0.0)
    assert claimed.name == "t-orphan"
    with running_dispatcher(db, queue):
        (request,) = target.wait_for(1, timeout=3)
        eventually(lambda: state_of(db, "t-orphan") == TaskState.DELETED)
    assert request.received_at - claimed_at >= 0.35  # not before the lease ran out
    assert request.header("X-CloudTasks-TaskRetryCount") == "1"
    assert request.header("X-CloudTasks-TaskPreviousResponse") == "0"
    assert request.header("X-CloudTasks-TaskRetryReason") == ""  # empty on HTTP targets


def test_reclaim_leases_resends_at_once(db: SqliteDatabase, target: RecordingTarget) -> None:
    queue = fast_queue()
    SqliteTaskQueue(db, queue, target.url).enqueue(TaskSpec(name="t-held", job_id="job-h"))
    TaskTable(db).claim_due("grading", time.time(), 10, "dead", 600.0, 0.0)
    with running_dispatcher(db, queue, reclaim_leases=True):
        (request,) = target.wait_for(1, timeout=2)
    assert request.header("X-CloudTasks-TaskRetryCount") == "1"


def test_lost_last_attempt_is_not_resent(db: SqliteDatabase, target: RecordingTarget) -> None:
    queue = fast_queue(max_attempts=1)
    SqliteTaskQueue(db, queue, target.url).enqueue(TaskSpec(name="t-last", job_id="job-l"))
    TaskTable(db).claim_due("grading", time.time(), 10, "dead", 0.1, 0.0)
    with running_dispatcher(db, queue):
        eventually(lambda: state_of(db, "t-last") == TaskState.DELETED)
    assert target.requests == []


def test_outcome_of_a_superseded_attempt_is_ignored(db: SqliteDatabase) -> None:
    table = TaskTable(db)
    SqliteTaskQueue(db, fast_queue(), "http://127.0.0.1:9/").enqueue(TaskSpec("t-f", "j"))
    (old,) = table.claim_due("grading", time.time(), 1, "a", 0.0, 0.0)
    (new,) = table.claim_due("grading", time.time() + 1, 1, "b", 60.0, 0.0)
    assert table.finish(old, "a", 200, "succeeded", time.time()) is False
    assert table.retry_later(old, "a", 500, "HTTP_ERROR", time.time()) is False
    assert table.finish(new, "b", 200, "succeeded", time.time()) is True


def test_a_task_stored_relative_to_the_worker_reaches_its_current_address(
    db: SqliteDatabase, target: RecordingTarget
) -> None:
    queue = fast_queue()
    # Enqueued while the worker listened elsewhere: only the path is stored.
    SqliteTaskQueue(db, queue, queue.target_path).enqueue(TaskSpec("t-rel", "job-rel"))
    with running_dispatcher(db, queue, target_base=target.url):
        (request,) = target.wait_for(1, timeout=3)
    assert request.path == queue.target_path and request.json == {"job_id": "job-rel"}


def test_a_table_made_before_the_execution_count_gets_it(db: SqliteDatabase) -> None:
    # The table as its first release made it: no execution_count column.
    old_schema = SCHEMA.replace("    execution_count INTEGER NOT NULL DEFAULT 0,\n", "")
    assert "execution_count" not in old_schema
    db.ensure_schema(old_schema)
    with db.transaction() as conn:
        conn.execute(
            "INSERT INTO tasks (queue, name, url, http_method, headers, body, schedule_time,"
            " created_at, state, response_count) VALUES ('grading', 't-old', 'http://x',"
            " 'POST', '{}', x'', 0, 0, 'pending', 2)"
        )
    table = TaskTable(db)
    row = table.get("grading", "t-old")
    assert row is not None
    assert (row.response_count, row.execution_count) == (2, 0)
