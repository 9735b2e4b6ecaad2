"""Writers on the shared SQLite file: joined transactions, commit hooks, queued writers."""

from __future__ import annotations

import contextlib
import multiprocessing
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.adapters.embedded.sqlite import SqliteDatabase

TABLE = "CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY, v INTEGER NOT NULL)"


@pytest.fixture
def db(tmp_path: Path) -> SqliteDatabase:
    database = SqliteDatabase(tmp_path / "w.db", busy_timeout_s=2.0)
    database.ensure_schema(TABLE)
    return database


def _keys(db: SqliteDatabase) -> list[str]:
    return [r["k"] for r in db.connection().execute("SELECT k FROM t ORDER BY k")]


def test_a_nested_transaction_joins_the_outer_one_and_commits_with_it(db: SqliteDatabase) -> None:
    other = sqlite3.connect(db.path)
    with db.transaction() as outer:
        outer.execute("INSERT INTO t VALUES ('a', 1)")
        with db.transaction() as inner:
            assert inner is outer
            assert db.in_transaction
            inner.execute("INSERT INTO t VALUES ('b', 2)")
        # Not visible elsewhere until the outermost block commits.
        assert other.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 0
    assert not db.in_transaction
    assert other.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 2
    other.close()


def test_an_error_caught_between_blocks_still_rolls_back_the_whole(db: SqliteDatabase) -> None:
    doomed = pytest.raises(sqlite3.OperationalError, match="joined write failed")
    with doomed, db.transaction() as conn:
        conn.execute("INSERT INTO t VALUES ('a', 1)")
        with contextlib.suppress(ValueError), db.transaction() as inner:
            inner.execute("INSERT INTO t VALUES ('b', 2)")
            raise ValueError("inner failure")
        # Later writes in the doomed transaction are refused, never run in autocommit.
        refused = pytest.raises(sqlite3.OperationalError, match="already failed")
        with refused, db.transaction() as again:
            again.execute("INSERT INTO t VALUES ('c', 3)")
    assert _keys(db) == []
    # The thread's connection is usable afterwards.
    with db.transaction() as conn:
        conn.execute("INSERT INTO t VALUES ('d', 4)")
    assert _keys(db) == ["d"]


def test_after_commit_callbacks_run_after_the_outermost_commit_only(db: SqliteDatabase) -> None:
    seen: list[tuple[str, bool]] = []
    with db.transaction() as conn:
        conn.execute("INSERT INTO t VALUES ('a', 1)")
        with db.transaction():
            db.after_commit(lambda: seen.append(("inner", db.in_transaction)))
        db.after_commit(lambda: seen.append(("outer", db.in_transaction)))
        assert seen == []
    assert seen == [("inner", False), ("outer", False)]
    # Outside a transaction a callback runs at once.
    db.after_commit(lambda: seen.append(("now", db.in_transaction)))
    assert seen[-1] == ("now", False)


def test_a_rolled_back_transaction_runs_no_callback(db: SqliteDatabase) -> None:
    seen: list[str] = []
    with pytest.raises(RuntimeError), db.transaction():
        db.after_commit(lambda: seen.append("ran"))
        raise RuntimeError("abort")
    with db.transaction():
        pass
    assert seen == []


def test_threads_of_one_process_take_turns_without_losing_a_write(db: SqliteDatabase) -> None:
    def add(n: int) -> None:
        for _i in range(50):
            with db.transaction() as conn:
                row = conn.execute("SELECT v FROM t WHERE k = 'n'").fetchone()
                conn.execute(
                    "INSERT OR REPLACE INTO t VALUES ('n', ?)", ((row[0] if row else 0) + 1,)
                )

    threads = [threading.Thread(target=add, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert db.connection().execute("SELECT v FROM t WHERE k = 'n'").fetchone()[0] == 400


def _hold_the_write_turn(path: str, held: multiprocessing.synchronize.Event, hold_s: float) -> None:
    other = SqliteDatabase(path, busy_timeout_s=5.0)
    with other.transaction() as conn:
        conn.execute("INSERT INTO t VALUES ('held', 1)")
        held.set()
        time.sleep(hold_s)


@contextlib.contextmanager
def another_process_writing(db: SqliteDatabase, hold_s: float) -> Iterator[None]:
    """Inside: another process holds the write turn for `hold_s` from its start."""
    spawn = multiprocessing.get_context("spawn")
    held = spawn.Event()
    child = spawn.Process(target=_hold_the_write_turn, args=(str(db.path), held, hold_s))
    child.start()
    try:
        assert held.wait(30)
        yield
    finally:
        child.join(30)


def test_a_writer_waits_for_another_process_then_goes_through(db: SqliteDatabase) -> None:
    with another_process_writing(db, 0.5):
        begun = time.monotonic()
        with db.transaction() as conn:
            conn.execute("INSERT INTO t VALUES ('mine', 2)")
        waited = time.monotonic() - begun
    assert 0.2 < waited < 2.0
    assert _keys(db) == ["held", "mine"]


def test_a_writer_gives_up_when_another_process_holds_the_turn_too_long(tmp_path: Path) -> None:
    impatient = SqliteDatabase(tmp_path / "w.db", busy_timeout_s=0.3)
    impatient.ensure_schema(TABLE)
    with another_process_writing(impatient, 2.0):
        begun = time.monotonic()
        refused = pytest.raises(sqlite3.OperationalError, match="another process")
        with refused, impatient.transaction() as conn:
            conn.execute("INSERT INTO t VALUES ('late', 1)")
        assert time.monotonic() - begun < 1.5
    assert _keys(impatient) == ["held"]
