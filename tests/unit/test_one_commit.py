"""On the embedded backend a job and its task, and a final state and its event, are one commit."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from services.intake.app import create_app as create_intake
from shared.adapters.embedded.api_key_store import SqliteApiKeyStore
from shared.adapters.embedded.event_publisher import SqliteEventPublisher
from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.adapters.embedded.task_queue import SqliteTaskQueue
from shared.adapters.embedded.task_table import TaskTable
from shared.adapters.embedded.unit_of_work import SqliteUnitOfWork
from shared.clock import SystemClock
from shared.config.queues import load_queues
from shared.config.settings import Settings
from shared.domain.api_keys import ApiKey
from shared.domain.errors import DependencyUnavailable
from shared.domain.ids import job_id_for, task_name_for
from shared.domain.job import GradingRequest, Job
from shared.domain.status import JobStatus
from shared.service_layer.intake import IntakeService
from shared.service_layer.worker import TaskDelivery, Verdict, WorkerService
from tests.fakes import ScriptedGrader

REQUEST = GradingRequest(submission_id="s1", answer="an answer", rubric=("c1",), max_score=10)


@dataclass
class Embedded:
    db: SqliteDatabase
    store: SqliteJobStore
    queue: SqliteTaskQueue
    publisher: SqliteEventPublisher
    uow: SqliteUnitOfWork
    since: int

    def commits(self) -> int:
        """The transactions committed since the last `restart` (the database's own count)."""
        return self.db.commits - self.since

    def restart(self) -> None:
        self.since = self.db.commits

    def messages(self) -> int:
        return int(self.db.connection().execute("SELECT COUNT(*) FROM bus_messages").fetchone()[0])


@pytest.fixture
def embedded(tmp_path: Path) -> Embedded:
    db = SqliteDatabase(tmp_path / "gradeq.db")
    queue = SqliteTaskQueue(db, load_queues()["grading"], "/tasks/grade")
    parts = Embedded(
        db, SqliteJobStore(db), queue, SqliteEventPublisher(db), SqliteUnitOfWork(db), 0
    )
    parts.restart()
    return parts


def _intake(e: Embedded) -> IntakeService:
    return IntakeService(e.store, e.queue, e.publisher, SystemClock(), uow=e.uow)


def _worker(e: Embedded) -> WorkerService:
    retry = load_queues()["grading"].retry_config
    return WorkerService(
        e.store, e.publisher, ScriptedGrader(), SystemClock(), retry, Settings().budget(), uow=e.uow
    )


def test_a_submission_writes_its_job_and_task_in_one_commit(embedded: Embedded) -> None:
    submitted = _intake(embedded).submit("client-a", "key-1", REQUEST)
    assert submitted.created
    assert embedded.commits() == 1
    job = submitted.job
    assert embedded.queue.exists(task_name_for(job.id, job.generation))
    # A retry of the request reads the job and finds its task: one (empty) turn, no new rows.
    again = _intake(embedded).submit("client-a", "key-1", REQUEST)
    assert not again.created and again.job.id == job.id
    assert embedded.commits() == 2


def test_a_task_that_cannot_be_written_leaves_no_job_behind(
    embedded: Embedded, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_insert(*args: object) -> bool:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(TaskTable, "insert", staticmethod(broken_insert))
    with pytest.raises(DependencyUnavailable):
        _intake(embedded).submit("client-a", "key-1", REQUEST)
    assert embedded.store.get(job_id_for("client-a", "key-1")) is None
    assert embedded.store.active_counts("client-a").client == 0
    assert embedded.store.active_counts("client-a").total == 0


def test_a_delivery_claims_then_stores_the_result_and_its_event_in_one_commit(
    embedded: Embedded,
) -> None:
    job = _intake(embedded).submit("client-a", "key-1", REQUEST).job
    embedded.restart()
    result = _worker(embedded).handle(TaskDelivery(job.id, "t"))
    assert result.verdict is Verdict.DONE
    assert embedded.commits() == 2  # the claim, then the outcome with its event
    stored = embedded.store.get(job.id)
    assert stored is not None
    assert stored.status is JobStatus.SUCCEEDED and stored.event_published
    assert embedded.messages() == 1


def test_a_delivery_writes_its_job_twice_the_claim_then_the_announced_outcome(
    embedded: Embedded, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = _intake(embedded).submit("client-a", "key-1", REQUEST).job
    written: list[Job] = []
    write = SqliteJobStore._write

    def counted(store: SqliteJobStore, conn: sqlite3.Connection, job: Job, *, insert: bool) -> None:
        written.append(job)
        write(store, conn, job, insert=insert)

    monkeypatch.setattr(SqliteJobStore, "_write", counted)
    assert _worker(embedded).handle(TaskDelivery(job.id, "t")).verdict is Verdict.DONE
    # The outcome is stored already marked announced: publishing and marking are one
    # commit here, so no second write of the job is needed.
    assert [(j.status, j.event_published) for j in written] == [
        (JobStatus.RUNNING, False),
        (JobStatus.SUCCEEDED, True),
    ]
    assert embedded.messages() == 1 and embedded.store.get(job.id) == written[-1]


def test_an_event_that_cannot_be_stored_leaves_the_job_unfinished(
    embedded: Embedded, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = _intake(embedded).submit("client-a", "key-1", REQUEST).job

    def unavailable(event: object) -> str:
        raise DependencyUnavailable("bus table unwritable")

    monkeypatch.setattr(embedded.publisher, "publish", unavailable)
    with pytest.raises(DependencyUnavailable):
        _worker(embedded).handle(TaskDelivery(job.id, "t"))
    stored = embedded.store.get(job.id)
    assert stored is not None
    # Still the claimed attempt: its next delivery takes it over once the lease lapses.
    assert stored.status is JobStatus.RUNNING and not stored.event_published
    assert embedded.messages() == 0
    assert embedded.store.active_counts("client-a").client == 1


def test_the_intake_app_commits_a_job_with_its_task_or_not_at_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = Settings(data_dir=tmp_path)
    key, stored = ApiKey.issue("client-a", datetime.now(UTC))
    SqliteApiKeyStore(SqliteDatabase(settings.database_path)).add(stored)
    intake = create_intake(settings).test_client()

    def broken_insert(*args: object) -> bool:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(TaskTable, "insert", staticmethod(broken_insert))
    headers = {"Authorization": f"Bearer {key}", "Idempotency-Key": "k-1"}
    body = {"submission_id": "s", "answer": "a", "rubric": "r"}
    assert intake.post("/v1/grading-jobs", json=body, headers=headers).status_code == 503
    store = SqliteJobStore(SqliteDatabase(settings.database_path))
    assert store.get(job_id_for("client-a", "k-1")) is None
    monkeypatch.undo()
    assert intake.post("/v1/grading-jobs", json=body, headers=headers).status_code == 202
