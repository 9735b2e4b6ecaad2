"""Every adapter of every port turns an outage into DependencyUnavailable (a 503), never a 500.

- embedded: another process holds the SQLite file's write lock for longer than the store
  waits. Readers are not blocked by a writer in WAL mode, so the writes are what fail.
- google: the clients point at a loopback port where nothing listens (the service is
  down), with a one-second call deadline, so reads and writes fail alike.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from localcloud.stack import free_port
from shared.domain.errors import DependencyUnavailable
from shared.domain.status import JobStatus
from shared.ports import EventPublisher, JobStore, ProcessedEvents, TaskQueue, TaskSpec
from tests.contract.harness_events import sample_event
from tests.contract.test_job_store_contract import make_job

DEADLINE_S = 1.0


@dataclass(frozen=True)
class DownPorts:
    """One family's adapters while their backing service is down."""

    store: JobStore
    queue: TaskQueue
    publisher: EventPublisher
    processed: ProcessedEvents
    reads_fail: bool  # False where only writes are blocked (a locked SQLite file)


def _embedded(tmp_path: Path) -> Iterator[DownPorts]:
    from shared.adapters.embedded.event_publisher import SqliteEventPublisher
    from shared.adapters.embedded.job_store import SqliteJobStore
    from shared.adapters.embedded.processed_events import SqliteProcessedEvents
    from shared.adapters.embedded.sqlite import SqliteDatabase
    from shared.adapters.embedded.task_queue import SqliteTaskQueue
    from shared.config.queues import load_queues

    path = tmp_path / "gradeq.sqlite3"
    db = SqliteDatabase(path, busy_timeout_s=0.2)
    queue = load_queues()["grading"]
    ports = DownPorts(
        store=SqliteJobStore(db),
        queue=SqliteTaskQueue(db, queue, "http://127.0.0.1:9/tasks/grade"),
        publisher=SqliteEventPublisher(db),
        processed=SqliteProcessedEvents(db),
        reads_fail=False,
    )
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        yield ports
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def _google(monkeypatch: pytest.MonkeyPatch) -> Iterator[DownPorts]:
    from datetime import timedelta

    from google.cloud import firestore

    from shared.adapters.google.clients import bounded_retry, cloud_tasks_client, publisher_client
    from shared.adapters.google.event_publisher import PubSubEventPublisher
    from shared.adapters.google.job_store import FirestoreJobStore
    from shared.adapters.google.processed_events import FirestoreProcessedEvents
    from shared.adapters.google.task_queue import CloudTasksQueue
    from shared.config.queues import load_queues

    dead = f"127.0.0.1:{free_port()}"
    monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", dead)
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", dead)
    db = firestore.Client(project="demo-gradeq")
    publisher = publisher_client()
    queue = load_queues()["grading"]
    ttl = timedelta(days=1)
    yield DownPorts(
        store=FirestoreJobStore(db, "grading_jobs", ttl, deadline_s=DEADLINE_S),
        queue=CloudTasksQueue(
            cloud_tasks_client(dead),
            "projects/demo-gradeq/locations/europe-west1/queues/grading",
            target_url="http://127.0.0.1:9/tasks/grade",
            queue=queue,
            service_account="",
            audience="http://127.0.0.1:9",
            retry=bounded_retry(DEADLINE_S),
            timeout_s=DEADLINE_S,
        ),
        publisher=PubSubEventPublisher(
            publisher, publisher.topic_path("demo-gradeq", "grading-completed"), DEADLINE_S
        ),
        processed=FirestoreProcessedEvents(db, "processed_events", ttl, deadline_s=DEADLINE_S),
        reads_fail=True,
    )
    publisher.stop()


@pytest.fixture(params=["embedded", "google"])
def down(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[DownPorts]:
    if request.param == "embedded":
        yield from _embedded(tmp_path)
    else:
        yield from _google(monkeypatch)


def _unavailable(call: Callable[[], object]) -> None:
    with pytest.raises(DependencyUnavailable):
        call()


def test_job_store_writes_are_unavailable(down: DownPorts) -> None:
    _unavailable(lambda: down.store.create(make_job("outage-job")))
    _unavailable(lambda: down.store.update("outage-job", lambda j: j))


def test_job_store_reads_fail_only_where_the_store_is_unreachable(down: DownPorts) -> None:
    reads: list[Callable[[], object]] = [
        lambda: down.store.get("outage-job"),
        lambda: down.store.find(JobStatus.PENDING, datetime.now(UTC), 10),
        down.store.ping,
    ]
    for read in reads:
        if down.reads_fail:
            _unavailable(read)
        else:
            read()  # a writer's lock does not block readers (WAL): reads still answer


def test_task_queue_is_unavailable(down: DownPorts) -> None:
    _unavailable(lambda: down.queue.enqueue(TaskSpec("outage-task", "outage-job")))
    if down.reads_fail:
        _unavailable(down.queue.ping)


def test_event_publisher_is_unavailable(down: DownPorts) -> None:
    _unavailable(lambda: down.publisher.publish(sample_event()))
    if down.reads_fail:
        _unavailable(down.publisher.ping)


def test_processed_events_are_unavailable(down: DownPorts) -> None:
    _unavailable(lambda: down.processed.add("analytics", "event-1", {"job_id": "j"}))
    if down.reads_fail:
        _unavailable(lambda: down.processed.contains("analytics", "event-1"))
