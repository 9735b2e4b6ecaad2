"""An attempt's outcome survives a pump turn (or the last one, at stop) that fails.

The pump records the outcomes of ended attempts and claims the next tasks in one
transaction. When that transaction does not commit, the outcomes it held must wait for
the next turn: a lost outcome leaves its task leased until the lease runs out, then
sends it again although it succeeded (or forgets a failed attempt's retry count).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, cast

import pytest

from localcloud.tasks.dispatcher import Dispatcher
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.adapters.embedded.task_table import TaskRow, TaskState, TaskTable
from shared.config.queues import QueueConfig
from shared.ports import TaskSpec
from tests.contract.harness import eventually, fast_queue
from tests.support.failing_commit import fail_the_first_commit_that_grew
from tests.support.http_target import RecordingTarget, Reply, replies
from tests.unit.test_dispatcher import TOKEN, queue_for, state_of, tombstone

# A lease runs out 0.6 s after its claim: a lost outcome shows as a second delivery
# within the second the pump waits before it tries a failing table again.
SHORT_DEADLINE_S = 0.5
LEASE_MARGIN_S = 0.1


def short_lease_queue(**kwargs: Any) -> QueueConfig:
    return fast_queue(deadline_s=SHORT_DEADLINE_S, **kwargs)


def short_lease_dispatcher(
    db: SqliteDatabase,
    queue: QueueConfig,
    *,
    record_delay_s: float = 0.05,
    poll_interval_s: float = 0.05,
    paused: bool = False,
) -> Dispatcher:
    """`paused`: its pump takes no turn of its own (the test turns it by hand)."""
    dispatcher = Dispatcher(
        db,
        {queue.name: queue},
        push_token=TOKEN,
        grpc_address=None,
        poll_interval_s=poll_interval_s,
        lease_margin_s=LEASE_MARGIN_S,
        paused=paused,
    )
    dispatcher.pumps[queue.name].record_delay_s = record_delay_s
    return dispatcher


@contextmanager
def started(dispatcher: Dispatcher) -> Iterator[None]:
    dispatcher.start()
    try:
        yield
    finally:
        dispatcher.stop(grace_s=5.0)


class Recordings:
    """Counts the outcomes the table is asked to record (finish / retry_later)."""

    def __init__(self, table: TaskTable, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        self.fail_calls: set[int] = set()
        for name in ("finish", "retry_later"):
            monkeypatch.setattr(table, name, self._counted(getattr(table, name)))

    def _counted(self, method: Callable[..., bool]) -> Callable[..., bool]:
        def counted(*args: Any, **kwargs: Any) -> bool:
            self.count += 1
            if self.count in self.fail_calls:
                raise sqlite3.OperationalError("database is locked")
            return method(*args, **kwargs)

        return counted


def fail_claims_after_a_recording(
    dispatcher: Dispatcher, monkeypatch: pytest.MonkeyPatch
) -> list[str]:
    """The first claim of a turn that recorded an outcome fails (the turn rolls back).

    Returns where it failed: the name of the thread whose transaction it was.
    """
    table = dispatcher.table
    recordings = Recordings(table, monkeypatch)
    failed: list[str] = []
    claim_due = table.claim_due

    def claim_or_fail(*args: Any, **kwargs: Any) -> Any:
        if recordings.count and not failed:
            failed.append(threading.current_thread().name)
            raise sqlite3.OperationalError("database is locked")
        return claim_due(*args, **kwargs)

    monkeypatch.setattr(table, "claim_due", claim_or_fail)
    return failed


def fail_the_commit_after_a_recording(
    db: SqliteDatabase, dispatcher: Dispatcher, monkeypatch: pytest.MonkeyPatch
) -> list[str]:
    """The first transaction that recorded an outcome does not commit (rolled back).

    Returns where it failed: the name of the thread whose transaction it was.
    """
    recordings = Recordings(dispatcher.table, monkeypatch)
    return fail_the_first_commit_that_grew(db, monkeypatch, lambda: recordings.count)


FAULTS = {
    "claim fails": lambda db, dispatcher, mp: fail_claims_after_a_recording(dispatcher, mp),
    "commit fails": fail_the_commit_after_a_recording,
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_success_recorded_in_a_failed_turn_is_recorded_again_not_redelivered(
    db: SqliteDatabase, target: RecordingTarget, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    queue = short_lease_queue()
    assert queue_for(db, queue, target).enqueue(TaskSpec(name="t-once", job_id="job-1"))
    dispatcher = short_lease_dispatcher(db, queue)
    failed = FAULTS[fault](db, dispatcher, monkeypatch)
    with started(dispatcher):
        target.wait_for(1, timeout=5)
        eventually(lambda: tombstone(db, "t-once")[0] == TaskState.DELETED, timeout=8)
    assert failed == ["pump-grading"]  # the fault did hit a turn holding the outcome
    assert tombstone(db, "t-once") == (TaskState.DELETED, "succeeded")
    # A deleted task is never claimed again: the count is final.
    assert len(target.requests) == 1


def test_a_failure_recorded_in_a_failed_turn_keeps_its_retry_state(
    db: SqliteDatabase, target: RecordingTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    target.responder = replies(Reply(500), Reply())
    queue = short_lease_queue(min_backoff_s=0.05)
    assert queue_for(db, queue, target).enqueue(TaskSpec(name="t-retry", job_id="job-1"))
    dispatcher = short_lease_dispatcher(db, queue)
    failed = fail_claims_after_a_recording(dispatcher, monkeypatch)
    with started(dispatcher):
        _first, second = target.wait_for(2, timeout=8)
        eventually(lambda: tombstone(db, "t-retry")[0] == TaskState.DELETED, timeout=5)
    assert failed == ["pump-grading"]
    # The retry knows the first attempt's answer (a lost outcome would read as a lease
    # that ran out: no response). A 5xx counts as no execution, as Cloud Tasks counts.
    assert second.header("X-CloudTasks-TaskPreviousResponse") == "500"
    assert second.header("X-CloudTasks-TaskRetryReason") == ""
    assert second.header("X-CloudTasks-TaskExecutionCount") == "0"
    assert tombstone(db, "t-retry") == (TaskState.DELETED, "succeeded")
    assert len(target.requests) == 2


def test_an_outcome_whose_own_recording_fails_loses_none_of_the_turn(
    db: SqliteDatabase, target: RecordingTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two attempts end before the turn (record_delay_s); the second one's write fails,
    # which rolls the first one's back too: both must be recorded by a later turn.
    queue = short_lease_queue()
    tasks = queue_for(db, queue, target)
    names = ["t-first", "t-second"]
    for name in names:
        assert tasks.enqueue(TaskSpec(name=name, job_id=f"job-{name}"))
    dispatcher = short_lease_dispatcher(db, queue, record_delay_s=0.3)
    recordings = Recordings(dispatcher.table, monkeypatch)
    recordings.fail_calls = {2}
    with started(dispatcher):
        target.wait_for(2, timeout=5)
        for name in names:

            def deleted(name: str = name) -> bool:
                return tombstone(db, name)[0] == TaskState.DELETED

            eventually(deleted, timeout=8)
    assert recordings.count >= 3  # the failed write was tried again
    assert [tombstone(db, name) for name in names] == [(TaskState.DELETED, "succeeded")] * 2
    sent = [cast(str, r.header("X-CloudTasks-TaskName")) for r in target.requests]  # always sent
    assert sorted(sent) == names


def test_the_last_outcomes_survive_a_failed_commit_at_stop(
    db: SqliteDatabase, target: RecordingTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The outcome waits for the stop: the pump is turned by hand, once, so no turn records
    # it before. The stop's recording fails once and is tried again within the grace.
    queue = fast_queue()
    assert queue_for(db, queue, target).enqueue(TaskSpec(name="t-last", job_id="job-1"))
    dispatcher = short_lease_dispatcher(db, queue, paused=True)
    pump = dispatcher.pumps[queue.name]
    failed = fail_the_commit_after_a_recording(db, dispatcher, monkeypatch)
    with started(dispatcher):
        pump.turn()  # claims the task and starts its attempt
        target.wait_for(1, timeout=5)
        eventually(lambda: pump.in_flight == 0, timeout=5)
        assert state_of(db, "t-last") == TaskState.PENDING  # its outcome waits
        assert failed == []
    assert failed == [threading.current_thread().name]  # the stop's recording
    assert tombstone(db, "t-last") == (TaskState.DELETED, "succeeded")
    assert len(target.requests) == 1


def test_a_retry_after_past_year_9999_is_recorded(
    db: SqliteDatabase, target: RecordingTarget, caplog: pytest.LogCaptureFixture
) -> None:
    # Its log line once failed the recording: the task was sent again at every lease.
    target.responder = replies(Reply(429, {"Retry-After": str(10**12)}))
    queue = short_lease_queue()
    assert queue_for(db, queue, target).enqueue(TaskSpec(name="t-far", job_id="job-1"))
    with started(short_lease_dispatcher(db, queue)):
        target.wait_for(1, timeout=5)
        eventually(lambda: scheduled_at(db, "t-far") > time.time() + 10**11, timeout=5)
        time.sleep(1.5)  # more than two leases: a lost outcome would be sent again
    assert len(target.requests) == 1
    assert not [r for r in caplog.records if r.exc_info]


def test_an_outcome_that_cannot_be_recorded_holds_no_other_back(
    db: SqliteDatabase, target: RecordingTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Recording t-poison always fails (not the table's fault, and dooming the turn's
    # transaction): it is dropped alone, its lease runs out and it is sent again; the
    # outcomes of its turn and the tasks after it are recorded as usual.
    queue = short_lease_queue()
    tasks = queue_for(db, queue, target)
    for name in ("t-poison", "t-fine"):
        assert tasks.enqueue(TaskSpec(name=name, job_id=f"job-{name}"))
    dispatcher = short_lease_dispatcher(db, queue, record_delay_s=0.3)
    finish = dispatcher.table.finish

    def finish_or_fail(row: TaskRow, owner: str, responded: bool, reason: str, now: float) -> bool:
        if row.name == "t-poison" and reason == "succeeded":
            with db.transaction():
                raise ValueError("an outcome that cannot be recorded")
        return finish(row, owner, responded, reason, now)

    monkeypatch.setattr(dispatcher.table, "finish", finish_or_fail)
    with started(dispatcher):
        target.wait_for(2, timeout=5)
        eventually(lambda: tombstone(db, "t-fine")[0] == TaskState.DELETED, timeout=5)
        assert tasks.enqueue(TaskSpec(name="t-later", job_id="job-later"))
        eventually(lambda: tombstone(db, "t-later")[0] == TaskState.DELETED, timeout=5)
        eventually(lambda: names_sent(target).count("t-poison") >= 2, timeout=5)
    assert tombstone(db, "t-fine") == (TaskState.DELETED, "succeeded")
    assert tombstone(db, "t-later") == (TaskState.DELETED, "succeeded")
    assert names_sent(target).count("t-fine") == 1
    assert names_sent(target).count("t-later") == 1


def scheduled_at(db: SqliteDatabase, name: str) -> float:
    sql = "SELECT schedule_time FROM tasks WHERE name = ? AND lease_owner IS NULL"
    row = db.connection().execute(sql, (name,)).fetchone()
    return float(row[0]) if row else 0.0


def names_sent(target: RecordingTarget) -> list[str | None]:
    return [r.header("X-CloudTasks-TaskName") for r in target.requests]
