"""Wake-ups between processes sharing a database: a datagram after a commit."""

from __future__ import annotations

import time
from pathlib import Path

from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.adapters.embedded.task_queue import SqliteTaskQueue
from shared.adapters.embedded.wakeup import TASKS, WakeListener, WakeSender, address
from shared.config.queues import load_queues
from shared.ports import TaskSpec


def test_a_signal_wakes_the_listener_of_its_database_and_channel_only(tmp_path: Path) -> None:
    mine = WakeListener(tmp_path / "a.db", TASKS)
    other_db = WakeListener(tmp_path / "b.db", TASKS)
    other_channel = WakeListener(tmp_path / "a.db", "bus")
    try:
        assert mine.bound and other_db.bound and other_channel.bound
        assert mine.wait(0.0) is False
        WakeSender(tmp_path / "a.db", TASKS).notify()
        begun = time.monotonic()
        assert mine.wait(5.0) is True
        assert time.monotonic() - begun < 1.0
        assert other_db.wait(0.05) is False
        assert other_channel.wait(0.05) is False
        # Signals are drained: the next wait times out.
        assert mine.wait(0.05) is False
    finally:
        for listener in (mine, other_db, other_channel):
            listener.close()


def test_many_signals_before_a_wait_wake_it_once(tmp_path: Path) -> None:
    listener = WakeListener(tmp_path / "a.db", TASKS)
    try:
        sender = WakeSender(tmp_path / "a.db", TASKS)
        for _ in range(50):
            sender.notify()
        assert listener.wait(1.0) is True
        assert listener.wait(0.05) is False
    finally:
        listener.close()


def test_sending_without_a_listener_is_harmless(tmp_path: Path) -> None:
    WakeSender(tmp_path / "nobody.db", TASKS).notify()


def test_a_second_listener_on_a_channel_is_unbound_but_still_wakes_in_process(
    tmp_path: Path,
) -> None:
    first = WakeListener(tmp_path / "a.db", TASKS)
    second = WakeListener(tmp_path / "a.db", TASKS)
    try:
        assert first.bound and not second.bound
        second.wake()
        assert second.wait(1.0) is True
        assert second.wait(0.05) is False
    finally:
        first.close()
        second.close()
    # Closed: the channel is free again.
    again = WakeListener(tmp_path / "a.db", TASKS)
    try:
        assert again.bound
    finally:
        again.close()


def test_the_address_depends_on_the_resolved_path(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    assert address(tmp_path / "sub" / ".." / "a.db", TASKS) == address(tmp_path / "a.db", TASKS)
    assert address(tmp_path / "a.db", TASKS) != address(tmp_path / "a.db", "bus")


def test_an_enqueue_signals_the_dispatcher_after_its_commit_only(tmp_path: Path) -> None:
    db = SqliteDatabase(tmp_path / "q.db")
    queue = SqliteTaskQueue(db, load_queues()["grading"], "/tasks/grade")
    listener = WakeListener(db.path, TASKS)
    try:
        with db.transaction():
            assert queue.enqueue(TaskSpec("t-1", "job-1")) is True
            assert listener.wait(0.05) is False  # not before the commit
        assert listener.wait(1.0) is True
        # A duplicate name creates nothing and signals nothing.
        assert queue.enqueue(TaskSpec("t-1", "job-1")) is False
        assert listener.wait(0.05) is False
    finally:
        listener.close()
