"""The local dispatcher delivers like Cloud Tasks: headers, retries, deadlines, give-up."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest

from localcloud.tasks.dispatcher import Dispatcher
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.adapters.embedded.task_queue import SqliteTaskQueue
from shared.adapters.embedded.task_table import TaskRow, TaskState
from shared.config.queues import QueueConfig
from shared.domain.errors import DependencyUnavailable
from shared.ports import TaskSpec
from tests.contract.harness import eventually, fast_queue, running_dispatcher
from tests.support.failing_commit import fail_every_transaction_while
from tests.support.http_target import RecordingTarget, Reply, replies

TOKEN = "local-push-secret"


@contextmanager
def running(db: SqliteDatabase, queue: QueueConfig) -> Iterator[Dispatcher]:
    with running_dispatcher(db, queue, push_token=TOKEN) as dispatcher:
        yield dispatcher


def queue_for(db: SqliteDatabase, queue: QueueConfig, target: RecordingTarget) -> SqliteTaskQueue:
    return SqliteTaskQueue(db, queue, target.url + queue.target_path)


def tombstone(db: SqliteDatabase, name: str) -> tuple[str, str]:
    row = (
        db.connection()
        .execute("SELECT state, delete_reason FROM tasks WHERE name = ?", (name,))
        .fetchone()
    )
    return row["state"], row["delete_reason"]


def test_headers_and_counters_across_retries(db: SqliteDatabase, target: RecordingTarget) -> None:
    target.responder = replies(Reply(500), Reply(503), Reply())
    queue = fast_queue(min_backoff_s=0.1, max_doublings=2)
    tq = queue_for(db, queue, target)
    assert tq.enqueue(TaskSpec(name="t-abc", job_id="job-1")) is True
    with running(db, queue):
        first, second, third = target.wait_for(3, timeout=5)
        eventually(lambda: tombstone(db, "t-abc") == (TaskState.DELETED, "succeeded"))

    for attempt, request in enumerate((first, second, third)):
        assert request.method == "POST"
        assert request.path == "/tasks/grade"
        assert request.json == {"job_id": "job-1"}
        assert request.header("Content-Type") == "application/json"
        assert request.header("User-Agent") == "Google-Cloud-Tasks"
        assert request.header("Authorization") == f"Bearer {TOKEN}"
        assert request.header("X-CloudTasks-QueueName") == "grading"
        assert request.header("X-CloudTasks-TaskName") == "t-abc"
        assert request.header("X-CloudTasks-TaskRetryCount") == str(attempt)
        # Cloud Tasks counts no 5xx answer as an execution (recordings of the real service).
        assert request.header("X-CloudTasks-TaskExecutionCount") == "0"
        eta = float(request.header("X-CloudTasks-TaskETA") or "nan")
        assert abs(eta - time.time()) < 10
    assert first.header("X-CloudTasks-TaskPreviousResponse") is None
    assert first.header("X-CloudTasks-TaskRetryReason") is None
    assert second.header("X-CloudTasks-TaskPreviousResponse") == "500"
    assert third.header("X-CloudTasks-TaskPreviousResponse") == "503"
    # Recorded empty on every retry of an HTTP target.
    assert second.header("X-CloudTasks-TaskRetryReason") == ""
    assert third.header("X-CloudTasks-TaskRetryReason") == ""
    # Backoff 0.1 s then 0.2 s (doubling); the ETA moves with each retry.
    assert second.received_at - first.received_at >= 0.09
    assert third.received_at - second.received_at >= 0.19
    assert float(third.header("X-CloudTasks-TaskETA") or 0) > float(
        first.header("X-CloudTasks-TaskETA") or 0
    )


def test_execution_count_counts_only_answers_below_500(
    db: SqliteDatabase, target: RecordingTarget
) -> None:
    # The sequence recorded against real Cloud Tasks: 503, 404, 429, 500, 302, then 200.
    target.responder = replies(503, 404, 429, 500, 302, 200)
    queue = fast_queue(max_attempts=10, min_backoff_s=0.01, max_backoff_s=0.02)
    queue_for(db, queue, target).enqueue(TaskSpec(name="t-count", job_id="job-count"))
    with running(db, queue):
        received = target.wait_for(6, timeout=5)
    counts = [r.header("X-CloudTasks-TaskExecutionCount") for r in received]
    assert counts == ["0", "0", "1", "2", "2", "3"]
    previous = [r.header("X-CloudTasks-TaskPreviousResponse") for r in received]
    assert previous == [None, "503", "404", "429", "500", "302"]


def test_retry_after_is_honoured_for_429_and_503_only(
    db: SqliteDatabase, target: RecordingTarget
) -> None:
    target.responder = replies(
        Reply(429, {"Retry-After": "1"}), Reply(500, {"Retry-After": "30"}), Reply()
    )
    queue = fast_queue(min_backoff_s=0.1)
    queue_for(db, queue, target).enqueue(TaskSpec(name="t-ra", job_id="job-ra"))
    with running(db, queue):
        first, second, third = target.wait_for(3, timeout=6)
    assert second.received_at - first.received_at >= 0.95
    assert third.received_at - second.received_at < 1.5  # 500: plain backoff (0.2 s)
    assert second.header("X-CloudTasks-TaskPreviousResponse") == "429"


def test_deadline_passed_means_retry_while_the_first_attempt_still_runs(
    db: SqliteDatabase, target: RecordingTarget
) -> None:
    target.responder = replies(Reply(200, delay_s=1.5), Reply())
    queue = fast_queue(deadline_s=0.4, min_backoff_s=0.1)
    queue_for(db, queue, target).enqueue(TaskSpec(name="t-slow", job_id="job-slow"))
    with running(db, queue):
        first, second = target.wait_for(2, timeout=5)
        assert target.max_in_flight == 2  # the second delivery overlaps the first
        assert second.received_at - first.received_at < 1.2
        assert second.header("X-CloudTasks-TaskRetryCount") == "1"
        assert second.header("X-CloudTasks-TaskExecutionCount") == "0"
        # As recorded after an attempt that ran past its deadline: a gateway timeout.
        assert second.header("X-CloudTasks-TaskPreviousResponse") == "504"
        assert second.header("X-CloudTasks-TaskRetryReason") == ""


def test_gives_up_after_max_attempts_and_keeps_a_tombstone(
    db: SqliteDatabase, target: RecordingTarget, caplog: pytest.LogCaptureFixture
) -> None:
    target.responder = lambda _r: Reply(500)
    queue = fast_queue(max_attempts=3, min_backoff_s=0.05)
    tq = queue_for(db, queue, target)
    tq.enqueue(TaskSpec(name="t-doomed", job_id="job-doomed"))
    with running(db, queue):
        target.wait_for(3, timeout=5)
        time.sleep(0.5)  # would be enough for two more attempts
    assert len(target.requests) == 3
    state, reason = tombstone(db, "t-doomed")
    assert state == TaskState.DELETED
    assert "exhausted after 3 attempts" in reason
    assert any("t-doomed deleted" in r.getMessage() for r in caplog.records)
    assert tq.enqueue(TaskSpec(name="t-doomed", job_id="job-doomed")) is False


def test_unreachable_target_is_retried_until_duration_also_runs_out(db: SqliteDatabase) -> None:
    queue = fast_queue(
        max_attempts=2, max_retry_duration_s=0.6, min_backoff_s=0.05, max_doublings=0
    )
    tq = SqliteTaskQueue(db, queue, "http://127.0.0.1:9/unreachable")
    tq.enqueue(TaskSpec(name="t-gone", job_id="job-gone"))
    with running(db, queue):
        eventually(lambda: tombstone(db, "t-gone")[0] == TaskState.DELETED, timeout=5)
    state, reason = tombstone(db, "t-gone")
    attempts = db.connection().execute("SELECT dispatch_count FROM tasks").fetchone()[0]
    assert state == TaskState.DELETED
    assert "UNREACHABLE" in reason
    assert attempts > 2  # max_attempts alone would have stopped at 2


def test_schedule_time_is_honoured(db: SqliteDatabase, target: RecordingTarget) -> None:
    queue = fast_queue()
    at = datetime.now(UTC) + timedelta(seconds=0.8)
    queue_for(db, queue, target).enqueue(TaskSpec(name="t-later", job_id="j", schedule_time=at))
    with running(db, queue):
        time.sleep(0.6)
        assert target.requests == []
        (request,) = target.wait_for(1, timeout=3)
    assert float(request.header("X-CloudTasks-TaskETA") or 0) == pytest.approx(at.timestamp())
    assert time.time() >= at.timestamp()


def test_names_are_deduplicated_for_the_reservation_window(
    db: SqliteDatabase, target: RecordingTarget
) -> None:
    queue = fast_queue()
    tq = SqliteTaskQueue(db, queue, target.url, name_reservation=timedelta(seconds=0.5))
    spec = TaskSpec(name="t-once", job_id="job-once")
    assert tq.enqueue(spec) is True
    assert tq.enqueue(spec) is False
    assert tq.enqueue(TaskSpec(name="t-other", job_id="job-once")) is True
    with running(db, queue):
        target.wait_for(2, timeout=3)
        time.sleep(0.1)
        assert tq.enqueue(spec) is False  # done, but the name stays reserved
        time.sleep(0.6)
        assert tq.enqueue(spec) is True  # the reservation ran out
        received = target.wait_for(3, timeout=3)
    names = [cast(str, r.header("X-CloudTasks-TaskName")) for r in received]  # always sent
    assert sorted(names) == ["t-once", "t-once", "t-other"]


def test_enqueue_in_a_callers_transaction_rolls_back_with_it(db: SqliteDatabase) -> None:
    tq = SqliteTaskQueue(db, fast_queue(), "http://127.0.0.1:9/x")
    with pytest.raises(RuntimeError), db.transaction() as conn:
        assert tq.enqueue_in(conn, TaskSpec(name="t-tx", job_id="j")) is True
        raise RuntimeError("the job write failed")
    assert tq.enqueue(TaskSpec(name="t-tx", job_id="j")) is True


def test_rejects_invalid_names_and_reports_a_broken_database(db: SqliteDatabase) -> None:
    tq = SqliteTaskQueue(db, fast_queue(), "http://127.0.0.1:9/x")
    tq.ping()
    with pytest.raises(ValueError, match="invalid task name"):
        tq.enqueue(TaskSpec(name="bad/name", job_id="j"))
    db.connection().execute("DROP TABLE tasks")
    with pytest.raises(DependencyUnavailable):
        tq.ping()
    with pytest.raises(DependencyUnavailable):
        tq.enqueue(TaskSpec(name="t-x", job_id="j"))


def test_body_is_the_job_id_as_json(db: SqliteDatabase) -> None:
    tq = SqliteTaskQueue(db, fast_queue(), "http://127.0.0.1:8081/tasks/grade")
    row = tq.new_task(TaskSpec(name="t-1", job_id="job-42"))
    assert json.loads(row.body) == {"job_id": "job-42"}
    assert row.url == "http://127.0.0.1:8081/tasks/grade"
    assert row.headers == {"Content-Type": "application/json"}


@contextmanager
def lazily_recording(db: SqliteDatabase, queue: QueueConfig) -> Iterator[Dispatcher]:
    """A dispatcher whose pump records outcomes only with a later turn (30 s at most)."""
    dispatcher = Dispatcher(
        db, {queue.name: queue}, push_token=TOKEN, grpc_address=None, poll_interval_s=30.0
    )
    dispatcher.pumps[queue.name].record_delay_s = 30.0
    dispatcher.start()
    try:
        yield dispatcher
    finally:
        dispatcher.stop(grace_s=5.0)


def state_of(db: SqliteDatabase, name: str) -> str:
    row = db.connection().execute("SELECT state FROM tasks WHERE name = ?", (name,)).fetchone()
    return str(row["state"])


def test_an_attempt_that_ends_leaves_its_outcome_for_a_later_turn(
    db: SqliteDatabase, target: RecordingTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With slots free, an ended attempt asks the pump for no turn (a transaction) of its
    # own: the next turn records it. The turns are taken by hand, so no race decides.
    queue = fast_queue()
    assert queue_for(db, queue, target).enqueue(TaskSpec(name="t-lazy", job_id="job-1"))
    dispatcher = Dispatcher(
        db, {queue.name: queue}, push_token=TOKEN, grpc_address=None, paused=True
    )
    pump = dispatcher.pumps[queue.name]
    asked: list[str] = []
    monkeypatch.setattr(pump, "wake", lambda: asked.append("a turn"))
    dispatcher.start()
    try:
        pump.turn()  # claims the task and starts its attempt
        target.wait_for(1, timeout=5)
        eventually(lambda: pump.in_flight == 0)
        assert asked == []
        assert state_of(db, "t-lazy") != TaskState.DELETED
        pump.turn()
        assert tombstone(db, "t-lazy") == (TaskState.DELETED, "succeeded")
    finally:
        dispatcher.stop(grace_s=5.0)


def test_an_attempt_that_frees_the_last_slot_wakes_the_pump(
    db: SqliteDatabase, target: RecordingTarget
) -> None:
    queue = fast_queue(concurrency=1)
    tasks = queue_for(db, queue, target)
    for n in range(3):
        assert tasks.enqueue(TaskSpec(name=f"t-slot-{n}", job_id=f"job-{n}"))
    with lazily_recording(db, queue):
        target.wait_for(3, timeout=5)
    assert target.max_in_flight == 1


def test_a_slow_attempt_in_flight_costs_no_turns(
    db: SqliteDatabase, target: RecordingTarget
) -> None:
    # The pump looks for outcomes every record_delay_s while an attempt is in flight,
    # but claims (a transaction) only when there is something to record or to find.
    target.responder = replies(Reply(delay_s=1.0))
    queue = fast_queue()
    assert queue_for(db, queue, target).enqueue(TaskSpec(name="t-slow", job_id="job-1"))
    dispatcher = Dispatcher(
        db, {queue.name: queue}, push_token=TOKEN, grpc_address=None, poll_interval_s=30.0
    )
    pump = dispatcher.pumps[queue.name]
    pump.record_delay_s = 0.01
    claims: list[int] = []
    claim_due = pump.table.claim_due

    def counted(*args: Any, **kwargs: Any) -> list[TaskRow]:
        found = claim_due(*args, **kwargs)
        claims.append(len(found))
        return found

    pump.table.claim_due = counted  # type: ignore[method-assign]
    dispatcher.start()
    try:
        target.wait_for(1, timeout=5)
        time.sleep(0.5)
        turns_while_in_flight = len(claims)
        eventually(lambda: tombstone(db, "t-slow") == (TaskState.DELETED, "succeeded"))
    finally:
        dispatcher.stop(grace_s=5.0)
    assert turns_while_in_flight <= 3, claims


def test_a_failing_table_is_retried_after_a_second(
    db: SqliteDatabase, target: RecordingTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Outcomes waiting to be recorded do not make the pump retry a failing table at once.
    broken = threading.Event()

    def break_then_answer(_request: object) -> Reply:
        broken.set()  # the table fails from the attempt on: its outcome waits
        return Reply()

    target.responder = break_then_answer
    queue = fast_queue()
    assert queue_for(db, queue, target).enqueue(TaskSpec(name="t-broken", job_id="job-1"))
    dispatcher = Dispatcher(
        db, {queue.name: queue}, push_token=TOKEN, grpc_address=None, poll_interval_s=30.0
    )
    dispatcher.pumps[queue.name].record_delay_s = 0.01
    failed = fail_every_transaction_while(db, monkeypatch, broken)
    dispatcher.start()
    try:
        target.wait_for(1, timeout=5)
        time.sleep(0.7)
        attempts = len(failed)
    finally:
        broken.clear()
        dispatcher.stop(grace_s=5.0)
    assert attempts <= 2, attempts
    assert tombstone(db, "t-broken") == (TaskState.DELETED, "succeeded")
