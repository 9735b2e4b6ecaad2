"""UnitOfWork on the shared SQLite file: the ports' writes inside `atomic()` are one commit."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from shared.adapters.embedded.sqlite import SqliteDatabase, unavailable_on_error


class SqliteUnitOfWork:
    """One SQLite transaction that the job store, task queue and publisher join."""

    commits_together = True

    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db

    @contextmanager
    def atomic(self) -> Iterator[None]:
        with unavailable_on_error("commit"), self._db.transaction():
            yield
