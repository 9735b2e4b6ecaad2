"""Writers on the shared SQLite file: joined transactions, commit hooks, queued writers."""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import signal
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from shared.adapters.embedded import sqlite as sqlite_module
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


# --- group commit ------------------------------------------------------------------------


def _queued_writers(
    db: SqliteDatabase, bodies: list[Callable[[sqlite3.Connection], None]]
) -> list[BaseException | None]:
    """Run `bodies[0]` first and hold it until every other body waits, then let all go."""
    outcomes: list[BaseException | None] = [None] * len(bodies)
    release = threading.Event()

    def write(i: int) -> None:
        try:
            with db.transaction() as conn:
                if i == 0:
                    started.set()
                    assert release.wait(30)
                bodies[i](conn)
        except BaseException as exc:
            outcomes[i] = exc

    started = threading.Event()
    first = threading.Thread(target=write, args=(0,))
    first.start()
    assert started.wait(30)
    others = [threading.Thread(target=write, args=(i,)) for i in range(1, len(bodies))]
    for thread in others:
        thread.start()
    give_up = time.monotonic() + 30
    while db.writers_waiting < len(others) and time.monotonic() < give_up:
        time.sleep(0.001)
    release.set()
    for thread in [first, *others]:
        thread.join(30)
    return outcomes


def _insert(key: str) -> Callable[[sqlite3.Connection], None]:
    def insert(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO t VALUES (?, 1)", (key,))

    return insert


@pytest.fixture
def patient(tmp_path: Path) -> SqliteDatabase:
    """Groups close only when nobody waits, so a test can tell exactly what one commit holds."""
    database = SqliteDatabase(tmp_path / "g.db", busy_timeout_s=30.0, group_window_s=60.0)
    database.ensure_schema(TABLE)
    return database


def test_writers_that_arrive_together_share_one_commit(patient: SqliteDatabase) -> None:
    before = patient.commits
    outcomes = _queued_writers(patient, [_insert(f"k{i:02}") for i in range(20)])
    assert outcomes == [None] * 20
    assert patient.commits - before == 1
    assert _keys(patient) == [f"k{i:02}" for i in range(20)]


def test_a_group_holds_at_most_group_max_writers(tmp_path: Path) -> None:
    db = SqliteDatabase(tmp_path / "g.db", busy_timeout_s=30.0, group_max=3, group_window_s=60.0)
    db.ensure_schema(TABLE)
    before = db.commits
    assert _queued_writers(db, [_insert(f"k{i}") for i in range(7)]) == [None] * 7
    assert db.commits - before == 3  # 3 + 3 + 1
    assert len(_keys(db)) == 7


def test_a_failed_write_fails_only_its_caller(patient: SqliteDatabase) -> None:
    def broken(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO t VALUES ('bad', 1)")
        raise ValueError("the caller's own failure")

    def duplicate(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO t VALUES ('dup', 1)")
        conn.execute("INSERT INTO t VALUES ('k0', 1)")  # primary key taken by writer 0

    bodies = [_insert("k0"), _insert("k1"), broken, _insert("k3"), duplicate, _insert("k5")]
    outcomes = _queued_writers(patient, bodies)
    assert isinstance(outcomes[2], ValueError)
    assert isinstance(outcomes[4], sqlite3.IntegrityError)
    assert [o for i, o in enumerate(outcomes) if i not in (2, 4)] == [None] * 4
    assert _keys(patient) == ["k0", "k1", "k3", "k5"]


def test_a_failed_first_writer_of_a_group_leaves_the_others_theirs(
    patient: SqliteDatabase,
) -> None:
    def broken(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO t VALUES ('bad', 1)")
        raise ValueError("the first writer's failure")

    outcomes = _queued_writers(patient, [broken, _insert("k1"), _insert("k2")])
    assert isinstance(outcomes[0], ValueError)
    assert outcomes[1:] == [None, None]
    assert _keys(patient) == ["k1", "k2"]


def test_every_writer_of_a_group_learns_that_its_commit_failed(tmp_path: Path) -> None:
    db = SqliteDatabase(tmp_path / "g.db", busy_timeout_s=30.0, group_window_s=60.0)
    # A deferred foreign key is checked only at COMMIT: one orphan fails the whole group.
    db.ensure_schema(
        "CREATE TABLE parent (k TEXT PRIMARY KEY);"
        "CREATE TABLE child (k TEXT PRIMARY KEY, p TEXT"
        " REFERENCES parent (k) DEFERRABLE INITIALLY DEFERRED)"
    )
    seen: list[str] = []

    def ok(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO parent VALUES ('p1')")
        db.after_commit(lambda: seen.append("committed"))

    def orphan(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO child VALUES ('c1', 'missing')")

    outcomes = _queued_writers(db, [ok, orphan, ok])
    assert all(isinstance(o, sqlite3.OperationalError) for o in outcomes[:2])
    assert "group commit failed" in str(outcomes[0])
    assert seen == []
    assert db.connection().execute("SELECT COUNT(*) FROM parent").fetchone()[0] == 0
    # The file is usable at once afterwards.
    with db.transaction() as conn:
        conn.execute("INSERT INTO parent VALUES ('p2')")
    assert seen == []
    assert db.connection().execute("SELECT k FROM parent").fetchall()[0][0] == "p2"


def test_a_writer_killed_inside_its_group_neither_blocks_the_others_nor_leaves_a_write(
    db: SqliteDatabase,
) -> None:
    spawn = multiprocessing.get_context("spawn")
    held = spawn.Event()
    child = spawn.Process(target=_hold_the_write_turn, args=(str(db.path), held, 60.0))
    child.start()
    try:
        assert held.wait(30)
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)
        child.join(30)
        with db.transaction() as conn:
            conn.execute("INSERT INTO t VALUES ('after', 1)")
    finally:
        if child.is_alive():
            child.kill()
    assert _keys(db) == ["after"]


def _write_when_free(path: str, wrote: multiprocessing.synchronize.Event) -> None:
    other = SqliteDatabase(path, busy_timeout_s=30.0)
    with other.transaction() as conn:
        conn.execute("INSERT INTO t VALUES ('child', 1)")
    wrote.set()


def test_a_process_that_waited_writes_before_the_one_that_just_wrote_writes_again(
    db: SqliteDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    # However slowly the waiting process is scheduled (the bound is for stopped ones).
    monkeypatch.setattr(sqlite_module, "_COURTESY_S", 30.0)
    spawn = multiprocessing.get_context("spawn")
    wrote = spawn.Event()
    child = spawn.Process(target=_write_when_free, args=(str(db.path), wrote))
    file_lock = db._committer.file_lock
    try:
        with db.transaction() as conn:
            conn.execute("INSERT INTO t VALUES ('first', 1)")
            child.start()
            give_up = time.monotonic() + 30
            while not file_lock.others_waiting() and time.monotonic() < give_up:
                time.sleep(0.01)
            assert file_lock.others_waiting()
        # The turn is free; this process asks again at once, and lets the waiter go first.
        with db.transaction() as conn:
            assert conn.execute("SELECT k FROM t WHERE k = 'child'").fetchone() is not None
            conn.execute("INSERT INTO t VALUES ('second', 1)")
    finally:
        child.join(30)
    assert wrote.is_set()
    assert _keys(db) == ["child", "first", "second"]


def test_many_writers_at_once_share_commits_and_none_gives_up(tmp_path: Path) -> None:
    # The shape of 1,000 deliveries arriving together: each claim is one write.
    # A long window: however slowly this machine runs them, writers that wait share.
    db = SqliteDatabase(tmp_path / "burst.db", busy_timeout_s=30.0, group_window_s=60.0)
    db.ensure_schema(TABLE)
    writers = 300
    start = threading.Barrier(writers)
    failures: list[BaseException] = []

    def claim(i: int) -> None:
        start.wait()
        try:
            with db.transaction() as conn:
                conn.execute("INSERT INTO t VALUES (?, ?)", (f"job{i:03}", i))
        except BaseException as exc:
            failures.append(exc)

    before = db.commits
    threads = [threading.Thread(target=claim, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert failures == []
    assert len(_keys(db)) == writers
    assert db.commits - before <= writers // 2


def test_the_last_database_object_of_a_file_takes_its_connection_and_locks_with_it(
    tmp_path: Path,
) -> None:
    def open_descriptors() -> int:
        return len(os.listdir("/proc/self/fd"))

    gc.collect()
    before = open_descriptors()
    for i in range(50):
        db = SqliteDatabase(tmp_path / f"{i}.db")
        with db.transaction() as conn:
            conn.execute(TABLE)
        del db, conn
    gc.collect()
    assert open_descriptors() <= before + 2


def test_a_writer_that_gives_up_waiting_leaves_the_turn_and_the_file_free(
    patient: SqliteDatabase,
) -> None:
    impatient = SqliteDatabase(patient.path, busy_timeout_s=0.1)
    gave_up: list[BaseException] = []

    def late_writer() -> None:
        try:
            with impatient.transaction() as conn:
                conn.execute("INSERT INTO t VALUES ('late', 1)")
        except sqlite3.OperationalError as exc:
            gave_up.append(exc)

    with patient.transaction() as conn:
        conn.execute("INSERT INTO t VALUES ('holder', 1)")
        late = threading.Thread(target=late_writer)
        late.start()
        late.join(30)
        assert patient.writers_waiting == 0
    assert [str(e) for e in gave_up] == ["database is locked (writers of this process)"]
    # The holder's group committed alone, and every process may write again.
    with another_process_writing(patient, 0.0):
        pass
    assert _keys(patient) == ["held", "holder"]


class _Signal:
    """A callback that counts its calls; equal signals compare equal, as bound methods do."""

    def __init__(self) -> None:
        self.calls = 0
        self._guard = threading.Lock()

    def send(self) -> None:
        with self._guard:
            self.calls += 1


def test_a_once_per_commit_callback_runs_once_for_a_whole_group(patient: SqliteDatabase) -> None:
    signal_ = _Signal()
    each: list[str] = []

    def write_and_signal(key: str) -> Callable[[sqlite3.Connection], None]:
        def body(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO t VALUES (?, 1)", (key,))
            patient.after_commit(signal_.send, once_per_commit=True)
            patient.after_commit(lambda: each.append(key))

        return body

    before = patient.commits
    outcomes = _queued_writers(patient, [write_and_signal(f"k{i}") for i in range(6)])
    assert outcomes == [None] * 6
    assert patient.commits - before == 1
    assert signal_.calls == 1  # once for the commit of all six
    assert sorted(each) == [f"k{i}" for i in range(6)]  # plain callbacks: once a writer
    # A later commit signals again.
    with patient.transaction() as conn:
        conn.execute("INSERT INTO t VALUES ('later', 1)")
        patient.after_commit(signal_.send, once_per_commit=True)
    assert signal_.calls == 2


def test_a_once_per_commit_callback_of_a_failed_writer_does_not_run(
    patient: SqliteDatabase,
) -> None:
    signal_ = _Signal()

    def broken(conn: sqlite3.Connection) -> None:
        patient.after_commit(signal_.send, once_per_commit=True)
        raise ValueError("the caller's own failure")

    outcomes = _queued_writers(patient, [_insert("k0"), broken])
    assert outcomes[0] is None and isinstance(outcomes[1], ValueError)
    assert signal_.calls == 0


def test_a_queued_writer_is_handed_its_turn_and_its_commit_with_few_lock_operations(
    patient: SqliteDatabase,
) -> None:
    """Each lock operation a waiting writer makes can put a thread to sleep or wake one (a
    futex call and a GIL hand-off under load): a hand-off is one release, and a woken
    writer goes on without retaking an event's or the committer's lock."""
    lock_types = {type(threading.Lock()), type(threading.RLock())}
    operations = 0

    def count(frame: object, event: str, arg: object) -> None:
        nonlocal operations
        if event == "c_call" and type(getattr(arg, "__self__", None)) in lock_types:
            operations += 1

    writers = 9
    before = patient.commits
    threading.setprofile(count)
    try:
        outcomes = _queued_writers(patient, [_insert(f"k{i}") for i in range(writers)])
    finally:
        threading.setprofile(None)
    assert outcomes == [None] * writers
    assert patient.commits - before == 1
    # With threading.Event turns and a Condition on the committer's guard: about 22 a writer
    # (the test's own start and release of the threads included).
    assert operations / writers < 14
