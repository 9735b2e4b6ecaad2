"""One SQLite file shared by the embedded adapters and local processes (WAL mode).

Each thread keeps one long-lived connection for reads. Writes are group-committed: the
writers of one process take turns, in arrival order, on one write connection, and the
writes of everyone who arrives while a turn is running go into the same SQLite
transaction, committed once. Each writer's block runs inside its own SAVEPOINT, so a block
that fails is rolled back alone and fails only its caller; a caller returns only once the
transaction holding its write has committed (or raises if that commit failed), so it still
learns the fate of its own write. A group closes when nobody waits, or when it holds
`group_max` writers or has been open `group_window_s`, so the first writer's latency and
the other processes' wait stay short.

Processes take turns on an advisory `flock` on a lock file beside the database, held for
the length of one group. The kernel drops it when its holder dies (even by SIGKILL), and
SQLite rolls the dead holder's open transaction back, so a killed writer can neither block
the others nor leave half a group behind. SQLite's own busy handler only guards against
writers that bypass `transaction()`.

A `transaction()` opened inside another on the same thread joins it, so a caller can make
the writes of several adapters (a job and its task, a final state and its event) one
atomic block. Callbacks registered with `after_commit` run once that block is committed.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import sqlite3
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path

from shared.domain.errors import DependencyUnavailable

#: The committer of each database file in this process (keyed by pid: never shared
#: across a fork), shared by its SqliteDatabases and closed with the last of them.
_COMMITTERS: weakref.WeakValueDictionary[tuple[Path, int], _Committer] = (
    weakref.WeakValueDictionary()
)
_COMMITTERS_GUARD = threading.Lock()
# Polling steps for the cross-process lock (see _FileLock).
_FIRST_STEP_S = 0.0001
_LAST_STEP_S = 0.001
#: The longest a process lets registered waiters go first: they poll every millisecond,
#: so a live one takes the lock well within it; one that is stopped (SIGSTOP) or starved
#: of CPU costs the others no more than this per turn.
_COURTESY_S = 0.02
#: A group closes at this many writers or after this long open, whichever comes first.
GROUP_MAX = 128
GROUP_WINDOW_S = 0.02


@contextlib.contextmanager
def unavailable_on_error(what: str) -> Iterator[None]:
    """Turn any SQLite error (locked, unreadable, gone) into DependencyUnavailable (503)."""
    try:
        yield
    except sqlite3.Error as exc:
        raise DependencyUnavailable(f"embedded store: {what} failed: {exc}") from exc


class _FileLock:
    """An exclusive advisory lock on a file, taken in turn by the processes that want it.

    flock has no timed wait, so a contended process polls with a short, growing sleep.
    Polling alone favours the process that just released the lock (its next writer asks
    at once, the others are asleep), so a process that finds the lock taken registers as
    waiting (a shared lock on a second file) while it polls, and a process asking again
    right after its own turn first lets the registered waiters have it (for up to
    _COURTESY_S).

    One per database file and process (see _Committer): the descriptors are opened once.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._waiting_path = path.with_name(path.name + "-waiting")
        self._fds: tuple[int, int] | None = None
        self._released_at = float("-inf")

    def _descriptors(self) -> tuple[int, int]:
        if self._fds is None:
            self._fds = (
                os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600),
                os.open(self._waiting_path, os.O_RDWR | os.O_CREAT, 0o600),
            )
        return self._fds

    @staticmethod
    def _try(fd: int, operation: int) -> bool:
        try:
            fcntl.flock(fd, operation | fcntl.LOCK_NB)
            return True
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            return False

    def others_waiting(self) -> bool:
        """Whether another process is registered as waiting for the lock."""
        waiting = self._descriptors()[1]
        if self._try(waiting, fcntl.LOCK_EX):
            fcntl.flock(waiting, fcntl.LOCK_UN)
            return False
        return True

    def acquire(self, timeout_s: float) -> bool:
        fd, waiting = self._descriptors()
        now = time.monotonic()
        give_up = now + timeout_s
        if now - self._released_at < _COURTESY_S:
            patience = now + min(timeout_s / 2, _COURTESY_S)
            while self.others_waiting() and time.monotonic() < patience:
                time.sleep(_LAST_STEP_S)
        if self._try(fd, fcntl.LOCK_EX):
            return True
        # Held by another process only for as long as a checker looks (see others_waiting).
        fcntl.flock(waiting, fcntl.LOCK_SH)
        try:
            step = _FIRST_STEP_S
            while True:
                if time.monotonic() + step > give_up:
                    return False
                time.sleep(step)
                step = min(step * 2, _LAST_STEP_S)
                if self._try(fd, fcntl.LOCK_EX):
                    return True
        finally:
            fcntl.flock(waiting, fcntl.LOCK_UN)

    def release(self) -> None:
        if self._fds is not None:
            fcntl.flock(self._fds[0], fcntl.LOCK_UN)
            self._released_at = time.monotonic()

    def close(self) -> None:
        fds, self._fds = self._fds, None
        for fd in fds or ():
            os.close(fd)


class _Wakeup:
    """One waiting thread's signal: a lock taken when made, released to wake the waiter.

    A woken waiter returns at once, where a threading.Event's waiter must also retake the
    event's own lock from its setter: one futex wake a hand-off instead of a pile-up.
    """

    __slots__ = ("_lock", "is_set")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()
        self.is_set = False

    def set(self) -> None:
        """Wake the waiter (once; under the committer's guard where `is_set` is read)."""
        self.is_set = True
        self._lock.release()

    def wait(self, timeout_s: float = -1) -> bool:
        """Whether the signal came within `timeout_s` (-1: however long it takes)."""
        return self._lock.acquire(timeout=timeout_s)


class _Group:
    """The writers of one SQLite transaction; `settled` once it committed or failed."""

    def __init__(self) -> None:
        self.opened = time.monotonic()
        self.members = 1
        self.settled = False
        self.error: sqlite3.Error | None = None
        #: Writers whose block is done, waiting for the group to be settled.
        self.waiters: list[_Wakeup] = []
        #: The once-per-commit callbacks one of the group's writers has run already.
        self.ran: set[Callable[[], None]] = set()


class _ThreadState(threading.local):
    depth = 0
    doomed = False
    #: Callbacks of the open block, each with whether it runs once per commit.
    after_commit: list[tuple[Callable[[], None], bool]]

    def __init__(self) -> None:
        self.after_commit = []


class _Committer:
    """The write connection of one database file in this process, and its writers' queue.

    One writer at a time runs its block (`_busy`); the others wait in arrival order, each
    on its own wake-up, and are handed the turn directly, so none starves.
    """

    def __init__(self, path: Path, busy_timeout_s: float) -> None:
        self.path = path
        self.file_lock = _FileLock(path.with_name(path.name + ".write-lock"))
        self.local = _ThreadState()
        self.commits = 0
        self._guard = threading.Lock()
        self._busy = False
        self._waiting: deque[_Wakeup] = deque()
        self._group: _Group | None = None
        self._conn = sqlite3.connect(
            path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
        )
        self._conn.row_factory = sqlite3.Row
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("PRAGMA foreign_keys=ON")
        self._busy_ms = int(busy_timeout_s * 1000)
        # Closed with the last database object of the file (tests make thousands).
        weakref.finalize(self, _close, self._conn, self.file_lock, os.getpid())

    @property
    def connection(self) -> sqlite3.Connection:
        return self._conn

    # --- the turn within this process ----------------------------------------------------

    def take_turn(self, deadline: float) -> None:
        """Wait, in arrival order, for the write connection; give up at `deadline`."""
        with self._guard:
            if not self._busy and not self._waiting:
                self._busy = True
                return
            mine = _Wakeup()
            self._waiting.append(mine)
        if mine.wait(max(0.0, deadline - time.monotonic())):
            return
        with self._guard:
            if mine.is_set:  # handed the turn just as the wait ran out
                return
            self._waiting.remove(mine)
        raise sqlite3.OperationalError("database is locked (writers of this process)")

    def _pass_turn(self) -> None:
        with self._guard:
            if self._waiting:
                self._waiting.popleft().set()
            else:
                self._busy = False

    def first_to_run(self, group: _Group, callback: Callable[[], None]) -> bool:
        """Whether no other writer of the settled group has run `callback` yet."""
        with self._guard:
            if callback in group.ran:
                return False
            group.ran.add(callback)
            return True

    @property
    def waiting(self) -> int:
        with self._guard:
            return len(self._waiting)

    # --- a group -------------------------------------------------------------------------

    def join_group(self, deadline: float) -> _Group:
        """With the turn held: the open group, or a new one (file lock, BEGIN IMMEDIATE)."""
        group = self._group
        if group is not None and self._conn.in_transaction:
            group.members += 1
            return group
        if group is not None:  # SQLite rolled the group back under an earlier writer
            self._settle(group, sqlite3.OperationalError("the group's transaction was lost"))
        try:
            if not self.file_lock.acquire(max(0.0, deadline - time.monotonic())):
                raise sqlite3.OperationalError("database is locked (another process)")
            try:
                self._limit_busy_wait(deadline)
                self._conn.execute("BEGIN IMMEDIATE")
            except BaseException:
                self.file_lock.release()
                raise
        except BaseException:
            self._pass_turn()
            raise
        group = self._group = _Group()
        return group

    def _limit_busy_wait(self, deadline: float) -> None:
        """SQLite's own wait (for a writer that bypasses the turns) ends at `deadline`."""
        wait_ms = max(1, int((deadline - time.monotonic()) * 1000))
        if abs(wait_ms - self._busy_ms) > 50:  # a statement saved on every uncontended turn
            self._conn.execute(f"PRAGMA busy_timeout = {wait_ms}")
            self._busy_ms = wait_ms

    def await_settled(self, group: _Group) -> None:
        """Wait until the group's transaction is committed or has failed."""
        with self._guard:
            if group.settled:
                return
            mine = _Wakeup()
            group.waiters.append(mine)
        mine.wait()

    def leave(self, group: _Group, group_max: int, window_s: float) -> None:
        """With the turn held and the block closed: commit the group or pass the turn."""
        still_open = self._conn.in_transaction
        if still_open and group.members < group_max and time.monotonic() - group.opened < window_s:
            with self._guard:  # checked and handed over at once: a waiter may give up
                if self._waiting:
                    self._waiting.popleft().set()
                    return
        error: sqlite3.Error | None = None
        try:
            if still_open:
                self._conn.execute("COMMIT")
                self.commits += 1
            else:
                error = sqlite3.OperationalError("the group's transaction was lost")
        except sqlite3.Error as exc:
            error = exc
            with contextlib.suppress(sqlite3.Error):
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
        finally:
            # Whatever happened, the group ends and the turn moves on: a writer left
            # waiting here would hold the file from every process.
            self._settle(group, error)
            self._pass_turn()

    def _settle(self, group: _Group, error: sqlite3.Error | None) -> None:
        self.file_lock.release()
        self._group = None
        with self._guard:
            group.error = error
            group.settled = True
            waiters, group.waiters = group.waiters, []
        for waiter in waiters:  # outside the guard, which the woken never need again
            waiter.set()


def _close(conn: sqlite3.Connection, file_lock: _FileLock, pid: int) -> None:
    # A forked child leaves its parent's copies alone: closing them there could drop
    # locks SQLite holds in the child on the same file.
    if os.getpid() == pid:
        conn.close()
        file_lock.close()


#: Bumped in a forked child, so a database object made before the fork finds its
#: process's own committer (os.getpid on every call costs a system call).
_forks = 0


def _after_fork() -> None:
    global _forks
    _forks += 1


os.register_at_fork(after_in_child=_after_fork)


def _committer(path: Path, busy_timeout_s: float) -> _Committer:
    key = (path.resolve(), os.getpid())
    with _COMMITTERS_GUARD:
        committer = _COMMITTERS.get(key)
        if committer is None:
            committer = _COMMITTERS[key] = _Committer(key[0], busy_timeout_s)
        return committer


class SqliteDatabase:
    """A long-lived connection per thread to one database file; writes are group-committed."""

    def __init__(
        self,
        path: Path | str,
        busy_timeout_s: float = 30.0,
        group_max: int = GROUP_MAX,
        group_window_s: float = GROUP_WINDOW_S,
    ) -> None:
        """`busy_timeout_s`: how long a writer waits for the others before giving up.

        `group_max`, `group_window_s`: the most writers one commit carries, and the
        longest a group stays open for more of them.
        """
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._busy_timeout_s = busy_timeout_s
        self._group_max = group_max
        self._group_window_s = group_window_s
        self._readers = threading.local()
        self._own: tuple[int, _Committer] | None = None
        # journal_mode cannot change inside a transaction; WAL persists in the file.
        self.connection().execute("PRAGMA journal_mode=WAL")

    @property
    def _committer(self) -> _Committer:
        own = self._own
        if own is None or own[0] != _forks:
            own = self._own = (_forks, _committer(self.path, self._busy_timeout_s))
        return own[1]

    @property
    def commits(self) -> int:
        """How many write transactions this process has committed on the file."""
        return self._committer.commits

    @property
    def writers_waiting(self) -> int:
        """How many writers of this process wait for their turn on the file."""
        return self._committer.waiting

    def connection(self) -> sqlite3.Connection:
        """Inside a transaction, its connection; otherwise this thread's own for reads."""
        committer = self._committer
        if committer.local.depth:
            return committer.connection
        conn: sqlite3.Connection | None = getattr(self._readers, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                self.path,
                timeout=self._busy_timeout_s,
                isolation_level=None,
            )
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            self._readers.conn = conn
        return conn

    @property
    def in_transaction(self) -> bool:
        """Whether this thread is inside a `transaction()`."""
        return self._committer.local.depth > 0

    def after_commit(self, callback: Callable[[], None], once_per_commit: bool = False) -> None:
        """Run `callback` after the current transaction commits (at once outside one).

        Nothing runs when the transaction rolls back. A callback must not raise.
        `once_per_commit`: when several writers' blocks share one commit, an equal callback
        (a signal that something was written) runs once for them all, after it.
        """
        state = self._committer.local
        if state.depth:
            state.after_commit.append((callback, once_per_commit))
        else:
            callback()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """Run a write block, committed with the others waiting; inside another, join it.

        An exception that leaves a joined block dooms the whole block: the outer one rolls
        back even if a caller in between catches the exception. Returns once the block's
        writes are committed; raises if they are not.
        """
        committer = self._committer
        state = committer.local
        if state.depth:
            if state.doomed:
                raise sqlite3.OperationalError("the enclosing transaction already failed")
            state.depth += 1
            try:
                yield committer.connection
            except BaseException:
                state.doomed = True
                raise
            finally:
                state.depth -= 1
            return
        deadline = time.monotonic() + self._busy_timeout_s
        committer.take_turn(deadline)
        group = committer.join_group(deadline)
        conn = committer.connection
        # The group's first writer needs no savepoint: nothing precedes its writes, so a
        # failure rolls the whole transaction back (and the next writer opens another).
        savepoint = group.members > 1
        try:
            if savepoint:
                conn.execute("SAVEPOINT writer")
        except BaseException:
            committer.leave(group, self._group_max, self._group_window_s)
            raise
        state.depth, state.doomed = 1, False
        try:
            yield conn
            if state.doomed:
                raise sqlite3.OperationalError("a joined write failed; rolled back")
            if savepoint:
                conn.execute("RELEASE writer")
        except BaseException:
            state.after_commit.clear()
            # Only this block's writes go; the group's earlier writers keep theirs (unless
            # SQLite already rolled the whole transaction back, which `leave` reports).
            if conn.in_transaction:
                if savepoint:
                    conn.execute("ROLLBACK TO writer")
                    conn.execute("RELEASE writer")
                else:
                    conn.execute("ROLLBACK")
            raise
        finally:
            state.depth, state.doomed = 0, False
            committer.leave(group, self._group_max, self._group_window_s)
        committer.await_settled(group)
        if group.error is not None:
            state.after_commit.clear()
            raise sqlite3.OperationalError(f"the group commit failed: {group.error}")
        callbacks, state.after_commit = state.after_commit, []
        for callback, once in callbacks:
            if not once or committer.first_to_run(group, callback):
                callback()

    def ensure_schema(self, ddl: str) -> None:
        with self.transaction() as conn:
            for statement in ddl.split(";"):
                if statement.strip():
                    conn.execute(statement)
