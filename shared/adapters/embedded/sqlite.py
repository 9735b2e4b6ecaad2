"""One SQLite file shared by the embedded adapters and local processes (WAL mode).

Each process opens its own connections; SQLite's locking makes the single file safe to
share between the intake, the worker, the dispatcher and the bus.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from shared.domain.errors import DependencyUnavailable


@contextmanager
def unavailable_on_error(what: str) -> Iterator[None]:
    """Turn any SQLite error (locked, unreadable, gone) into DependencyUnavailable (503)."""
    try:
        yield
    except sqlite3.Error as exc:
        raise DependencyUnavailable(f"embedded store: {what} failed: {exc}") from exc


class SqliteDatabase:
    """A thread-local connection per thread to one database file."""

    def __init__(self, path: Path | str, busy_timeout_s: float = 30.0) -> None:
        """`busy_timeout_s`: how long a statement waits for another writer's lock."""
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._busy_timeout_s = busy_timeout_s
        self._local = threading.local()
        # journal_mode cannot change inside a transaction; WAL persists in the file.
        self.connection().execute("PRAGMA journal_mode=WAL")

    def connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=self._busy_timeout_s, isolation_level=None)
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            self._local.conn = conn
        return conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """Run a write transaction (BEGIN IMMEDIATE: the write lock is taken up front)."""
        conn = self.connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            # Also after a failed COMMIT (busy): never leave the thread's connection inside
            # a transaction, or every later request on it would fail.
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def ensure_schema(self, ddl: str) -> None:
        with self.transaction() as conn:
            for statement in ddl.split(";"):
                if statement.strip():
                    conn.execute(statement)
