"""Make the transactions of a database fail, as a full or broken disk would."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from shared.adapters.embedded.sqlite import SqliteDatabase


def fail_the_first_commit_that_grew(
    db: SqliteDatabase, monkeypatch: pytest.MonkeyPatch, count: Callable[[], int]
) -> list[str]:
    """The first outermost transaction of `db` during which `count()` grew does not
    commit: its block ran, then it raises "disk I/O error" and is rolled back.

    Returns where it failed: the name of the thread whose transaction it was.
    """
    failed: list[str] = []
    transaction = db.transaction

    @contextmanager
    def failing_commit() -> Iterator[sqlite3.Connection]:
        outermost = not db.in_transaction
        before = count()
        with transaction() as conn:
            yield conn
            if outermost and count() > before and not failed:
                failed.append(threading.current_thread().name)
                raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(db, "transaction", failing_commit)
    return failed


def fail_every_transaction_while(
    db: SqliteDatabase, monkeypatch: pytest.MonkeyPatch, broken: threading.Event
) -> list[float]:
    """While `broken` is set, every transaction of `db` raises "disk I/O error" before its
    block runs. Returns the monotonic time of each refused transaction."""
    failed: list[float] = []
    transaction = db.transaction

    @contextmanager
    def failing_while_broken() -> Iterator[sqlite3.Connection]:
        if broken.is_set():
            failed.append(time.monotonic())
            raise sqlite3.OperationalError("disk I/O error")
        with transaction() as conn:
            yield conn

    monkeypatch.setattr(db, "transaction", failing_while_broken)
    return failed
