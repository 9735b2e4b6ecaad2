"""TaskQueue on the shared SQLite file: a task row written where the job is (an outbox).

The local dispatcher (`localcloud.tasks`) delivers the rows over HTTP with Cloud Tasks
semantics.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from shared.adapters.embedded.sqlite import SqliteDatabase, unavailable_on_error
from shared.adapters.embedded.task_table import (
    DEFAULT_NAME_RESERVATION,
    PAUSED,
    RUNNING,
    TASK_ID,
    NewTask,
    TaskTable,
)
from shared.adapters.embedded.wakeup import TASKS, WakeSender
from shared.codecs.task_body import CONTENT_TYPE, encode_task_body
from shared.config.queues import QueueConfig
from shared.domain.errors import LaneNotFound
from shared.ports import TaskSpec


def _epoch(moment: datetime | None) -> float:
    if moment is None:
        return time.time()
    if moment.tzinfo is None:  # naive datetimes in this project mean UTC
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


class SqliteTaskQueue:
    """The TaskQueue port on the shared SQLite file; `localcloud.tasks` delivers."""

    def __init__(
        self,
        db: SqliteDatabase,
        queue: QueueConfig,
        target_url: str,
        name_reservation: timedelta = DEFAULT_NAME_RESERVATION,
        lanes: Mapping[str, QueueConfig] | None = None,
    ) -> None:
        self.table = TaskTable(db)
        self.queue = queue
        # Every queue a task may name (the lanes); the default queue is always one.
        self.lanes = {**(lanes or {}), queue.name: queue}
        self.target_url = target_url
        self.name_reservation = name_reservation
        self._wake = WakeSender(db.path, TASKS)

    def new_task(self, task: TaskSpec) -> NewTask:
        """Build the row for `task`: a JSON POST of the job id to the worker."""
        if not TASK_ID.match(task.name):
            raise ValueError(f"invalid task name {task.name!r}: want [A-Za-z0-9_-]{{1,500}}")
        return NewTask(
            queue=self._lane(task.queue),
            name=task.name,
            url=self.target_url,
            body=encode_task_body(task.job_id),
            headers={"Content-Type": CONTENT_TYPE},
            schedule_time=_epoch(task.schedule_time),
        )

    def enqueue_in(self, conn: sqlite3.Connection, task: TaskSpec) -> bool:
        """Enqueue inside the caller's write transaction; the dispatcher is woken on commit."""
        reservation = self.name_reservation.total_seconds()
        created = TaskTable.insert(conn, self.new_task(task), time.time(), reservation)
        if created:
            # One signal a commit: the dispatcher reads every task the commit holds.
            self.table.db.after_commit(self._wake.notify, once_per_commit=True)
        return created

    def enqueue(self, task: TaskSpec) -> bool:
        """Insert the task (joining the caller's transaction, if any); False if a duplicate."""
        with unavailable_on_error("enqueue task"), self.table.db.transaction() as conn:
            return self.enqueue_in(conn, task)

    def exists(self, task_name: str, queue: str | None = None) -> bool:
        with unavailable_on_error("look up task"):
            return self.table.get(self._lane(queue), task_name) is not None

    def pause(self, queue: str | None) -> None:
        with unavailable_on_error("pause queue"):
            self.table.set_state(self._lane(queue), PAUSED)

    def resume(self, queue: str | None) -> None:
        with unavailable_on_error("resume queue"):
            self.table.set_state(self._lane(queue), RUNNING)
        self._wake.notify()  # the dispatcher starts on the backlog at once

    def purge(self, queue: str | None) -> None:
        with unavailable_on_error("purge queue"):
            self.table.purge(self._lane(queue))

    def is_paused(self, queue: str | None) -> bool:
        with unavailable_on_error("read queue state"):
            return self.table.state(self._lane(queue)) == PAUSED

    def _lane(self, queue: str | None) -> str:
        if queue is None:
            return self.queue.name
        if queue not in self.lanes:
            raise LaneNotFound(f"no lane {queue!r}")
        return queue

    def ping(self) -> None:
        with unavailable_on_error("ping task queue"):
            self.table.db.connection().execute("SELECT 1 FROM tasks LIMIT 1").fetchall()
