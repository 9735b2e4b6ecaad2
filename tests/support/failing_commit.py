"""Make the first transaction that did some work fail at its commit, as a full disk would."""

from __future__ import annotations

import sqlite3
import threading
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
