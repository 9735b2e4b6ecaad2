"""One SQLite file shared by the embedded adapters and local processes (WAL mode).

Each thread keeps one long-lived connection. Writers queue for the file in two steps
before SQLite sees them: an in-process lock (threads of one process wait on it, woken at
once when it is released) and an advisory `flock` on a lock file beside the database
(processes take turns). SQLite's own busy handler sleeps in coarse steps of up to 100 ms,
which is where a contended writer used to spend its time; it now only guards against
writers that bypass `transaction()`.

A `transaction()` opened inside another on the same thread joins it, so a caller can make
the writes of several adapters (a job and its task, a final state and its event) one
commit. Callbacks registered with `after_commit` run once the outermost commit is done.
"""

from __future__ import annotations

import errno
import fcntl
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from shared.domain.errors import DependencyUnavailable

#: The writer locks of each database file in this process, shared by its SqliteDatabases.
_WRITER_LOCKS: dict[Path, tuple[threading.Lock, _FileLock]] = {}
_WRITER_LOCKS_GUARD = threading.Lock()
# Polling steps for the cross-process lock: flock has no timed wait, so a contended
# writer retries with a short, growing sleep until its budget is spent.
_FIRST_STEP_S = 0.0001
_LAST_STEP_S = 0.001


@contextmanager
def unavailable_on_error(what: str) -> Iterator[None]:
    """Turn any SQLite error (locked, unreadable, gone) into DependencyUnavailable (503)."""
    try:
        yield
    except sqlite3.Error as exc:
        raise DependencyUnavailable(f"embedded store: {what} failed: {exc}") from exc


class _FileLock:
    """An exclusive advisory lock on a file, shared by nobody across processes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._pid = 0

    def _descriptor(self) -> int:
        # A descriptor inherited over fork shares its lock with the parent: reopen.
        if self._fd is None or self._pid != os.getpid():
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            self._pid = os.getpid()
        return self._fd

    def acquire(self, timeout_s: float) -> bool:
        fd = self._descriptor()
        give_up = time.monotonic() + timeout_s
        step = _FIRST_STEP_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
            if time.monotonic() + step > give_up:
                return False
            time.sleep(step)
            step = min(step * 2, _LAST_STEP_S)

    def release(self) -> None:
        if self._fd is not None and self._pid == os.getpid():
            fcntl.flock(self._fd, fcntl.LOCK_UN)


def _writer_locks(database: Path) -> tuple[threading.Lock, _FileLock]:
    path = database.resolve()
    with _WRITER_LOCKS_GUARD:
        if path not in _WRITER_LOCKS:
            lock_file = _FileLock(path.with_name(path.name + ".write-lock"))
            _WRITER_LOCKS[path] = (threading.Lock(), lock_file)
        return _WRITER_LOCKS[path]


class _ThreadState(threading.local):
    conn: sqlite3.Connection | None = None
    depth = 0
    doomed = False
    after_commit: list[Callable[[], None]]

    def __init__(self) -> None:
        self.after_commit = []


class SqliteDatabase:
    """A long-lived connection per thread to one database file; writers queue in order."""

    def __init__(self, path: Path | str, busy_timeout_s: float = 30.0) -> None:
        """`busy_timeout_s`: how long a writer waits for the others before giving up."""
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._busy_timeout_s = busy_timeout_s
        self._local = _ThreadState()
        self._process_lock, self._file_lock = _writer_locks(self.path)
        # journal_mode cannot change inside a transaction; WAL persists in the file.
        self.connection().execute("PRAGMA journal_mode=WAL")

    def connection(self) -> sqlite3.Connection:
        conn = self._local.conn
        if conn is None:
            conn = sqlite3.connect(
                self.path,
                timeout=self._busy_timeout_s,
                isolation_level=None,
            )
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            self._local.conn = conn
        return conn

    @property
    def in_transaction(self) -> bool:
        """Whether this thread is inside a `transaction()`."""
        return self._local.depth > 0

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Run `callback` after the current transaction commits (at once outside one).

        Nothing runs when the transaction rolls back. A callback must not raise.
        """
        if self._local.depth:
            self._local.after_commit.append(callback)
        else:
            callback()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """Run a write transaction; inside another on this thread, join it.

        An exception that leaves a joined block dooms the whole transaction: the outer
        block rolls back even if a caller in between catches the exception.
        """
        state = self._local
        if state.depth:
            if state.doomed:
                raise sqlite3.OperationalError("the enclosing transaction already failed")
            state.depth += 1
            try:
                yield self.connection()
            except BaseException:
                state.doomed = True
                raise
            finally:
                state.depth -= 1
            return
        with self._write_turn():
            conn = self.connection()
            conn.execute("BEGIN IMMEDIATE")
            state.depth, state.doomed = 1, False
            try:
                yield conn
                if state.doomed:
                    raise sqlite3.OperationalError("a joined write failed; rolled back")
                conn.execute("COMMIT")
            except BaseException:
                state.after_commit.clear()
                # Also after a failed COMMIT (busy): never leave the thread's connection
                # inside a transaction, or every later request on it would fail.
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            finally:
                state.depth, state.doomed = 0, False
        callbacks, state.after_commit = state.after_commit, []
        for callback in callbacks:
            callback()

    @contextmanager
    def _write_turn(self) -> Iterator[None]:
        """Hold this process's and then the file's write lock, waiting at most the timeout."""
        if not self._process_lock.acquire(timeout=self._busy_timeout_s):
            raise sqlite3.OperationalError("database is locked (writers of this process)")
        try:
            if not self._file_lock.acquire(self._busy_timeout_s):
                raise sqlite3.OperationalError("database is locked (another process)")
            try:
                yield
            finally:
                self._file_lock.release()
        finally:
            self._process_lock.release()

    def ensure_schema(self, ddl: str) -> None:
        with self.transaction() as conn:
            for statement in ddl.split(";"):
                if statement.strip():
                    conn.execute(statement)
