"""On the embedded backend a submission's commit runs few SQL statements, and still checks
everything it did: the key's earlier job, the admission counters, the task's name."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.adapters.embedded.task_queue import SqliteTaskQueue
from shared.adapters.embedded.unit_of_work import SqliteUnitOfWork
from shared.clock import SystemClock
from shared.config.queues import load_queues
from shared.domain.admission import AdmissionLimits
from shared.domain.errors import TooManyActiveJobs
from shared.domain.job import GradingRequest
from shared.service_layer.intake import IntakeService
from tests.fakes import FakePublisher

REQUEST = GradingRequest(submission_id="s1", answer="an answer", rubric=("c1",), max_score=10)


class Statements:
    """Every SQL statement the database's write connection runs, in order."""

    def __init__(self, db: SqliteDatabase) -> None:
        self.seen: list[str] = []
        with db.transaction() as conn:  # the write connection every writer shares
            conn.set_trace_callback(self.seen.append)
        self.seen.clear()

    def take(self) -> list[str]:
        seen, self.seen = self.seen, []
        return seen


@pytest.fixture
def db(tmp_path: Path) -> Iterator[SqliteDatabase]:
    yield SqliteDatabase(tmp_path / "gradeq.db")


def _intake(db: SqliteDatabase, limits: AdmissionLimits | None = None) -> IntakeService:
    queue = SqliteTaskQueue(db, load_queues()["grading"], "http://127.0.0.1:9/tasks/grade")
    return IntakeService(
        SqliteJobStore(db), queue, FakePublisher(), SystemClock(), limits, uow=SqliteUnitOfWork(db)
    )


def test_a_new_job_and_its_task_take_six_statements(db: SqliteDatabase) -> None:
    intake = _intake(db)
    statements = Statements(db)
    assert intake.submit("client-a", "key-1", REQUEST).created
    ran = statements.take()
    # BEGIN, the admission read, the job, both counters at once, the task, COMMIT.
    assert len(ran) == 6, ran
    assert ran[0] == "BEGIN IMMEDIATE" and ran[-1] == "COMMIT"


def test_a_replay_reads_the_job_and_finds_its_task(db: SqliteDatabase) -> None:
    intake = _intake(db)
    first = intake.submit("client-a", "key-1", REQUEST)
    statements = Statements(db)
    again = intake.submit("client-a", "key-1", REQUEST)
    assert not again.created and again.job == first.job
    ran = statements.take()
    assert not any(s.startswith(("INSERT INTO jobs", "UPDATE jobs")) for s in ran), ran
    assert len(ran) <= 5, ran  # BEGIN, the admission read, the task kept, its lookup, COMMIT
    count = db.connection().execute("SELECT COUNT(*) FROM tasks").fetchone()[0]
    assert count == 1


def test_the_admission_counters_still_refuse_past_the_ceiling(db: SqliteDatabase) -> None:
    intake = _intake(db, AdmissionLimits(per_client=2, backlog=100))
    intake.submit("client-a", "key-1", REQUEST)
    intake.submit("client-a", "key-2", REQUEST)
    with pytest.raises(TooManyActiveJobs):
        intake.submit("client-a", "key-3", REQUEST)
    assert intake.submit("client-b", "key-1", REQUEST).created  # another client's own ceiling
    counters = dict(db.connection().execute("SELECT scope, active FROM job_counters").fetchall())
    assert counters == {"all": 3, "client:client-a": 2, "client:client-b": 1}
