"""Outcomes of ended deliveries, kept until the transaction recording them commits.

The local task queue's pumps and the bus's pump hand every request that ended back to
their pump thread, which records the outcomes with its next claim in one transaction. If
that transaction does not commit (a failed claim, a locked file, a failed COMMIT), the
outcomes it held are recorded again by the next turn: forgotten before, an acknowledged
delivery would be sent again when its lease runs out, and a refused one would lose its
backoff and last answer.

An outcome whose recording fails for another reason than the store (a bug, a value the
store cannot take) is dropped alone, with its traceback: tried again, it would fail again
and hold every later outcome back. Its lease runs out and it is delivered again.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.logs import job_context

T = TypeVar("T")

#: How long a pump, or a stop, waits before it tries a failing store again.
RETRY_S = 1.0


class PendingOutcomes(Generic[T]):
    """Outcomes handed back by the delivery threads, recorded by the pump's thread.

    `record` writes one outcome inside the pump's transaction; `store_errors` are the
    exceptions by which the store says the whole transaction failed; `name` and `job_id`
    label an outcome in the log lines.
    """

    def __init__(
        self,
        db: SqliteDatabase,
        record: Callable[[T], None],
        *,
        name: Callable[[T], str],
        job_id: Callable[[T], str | None],
        log: logging.Logger,
        store_errors: tuple[type[Exception], ...] = (sqlite3.Error,),
    ) -> None:
        self._db = db
        self._record = record
        self._name = name
        self._job_id = job_id
        self._log = log
        self._store_errors = store_errors
        #: Handed back by the delivery threads (deque appends are atomic) ...
        self._handed: deque[T] = deque()
        #: ... then taken by the pump, until the transaction recording them commits.
        self._unrecorded: list[T] = []

    def add(self, outcome: T) -> None:
        """Hand an outcome back (from any thread)."""
        self._handed.append(outcome)

    def __bool__(self) -> bool:
        """Whether an outcome waits to be recorded."""
        return bool(self._handed or self._unrecorded)

    def pending(self) -> list[T]:
        """The outcomes not recorded yet (for the pump's thread, or once it has stopped)."""
        return [*self._unrecorded, *self._handed]

    def record(self) -> None:
        """Record the outcomes handed back so far, inside the caller's transaction.

        They are forgotten only once that transaction commits. A store error fails the
        transaction and keeps them all; another error drops the outcome that raised it.
        """
        while self._handed:
            self._unrecorded.append(self._handed.popleft())
        for outcome in list(self._unrecorded):
            with job_context(self._job_id(outcome)):
                try:
                    self._record(outcome)
                except self._store_errors:
                    raise  # the store failed: the whole turn is tried again
                except Exception:
                    self._log.exception("%s: recording its outcome failed", self._name(outcome))
                    self._unrecorded.remove(outcome)
        if self._unrecorded:
            # Only the pump's thread adds to the list, and the callback runs before its
            # transaction() returns.
            self._db.after_commit(self._unrecorded.clear)

    def record_until(self, until: float, what: str, retry_s: float = RETRY_S) -> None:
        """Record the outcomes in a transaction of their own (at stop).

        A store that fails is tried again every `retry_s` until `until` (monotonic), at
        least once; the outcomes left then are logged by name: they are delivered again
        once their leases run out.
        """
        while True:
            try:
                with self._db.transaction():
                    self.record()
                return
            except Exception:
                left = until - time.monotonic()
                if left <= 0:
                    names = sorted(self._name(outcome) for outcome in self.pending())
                    self._log.exception(
                        "%s: recording the last outcomes failed; delivered again once their"
                        " leases run out: %s",
                        what,
                        ", ".join(names) or "none",
                    )
                    return
                self._log.exception("%s: recording the last outcomes failed", what)
                time.sleep(min(left, retry_s))
