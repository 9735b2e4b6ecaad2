"""The SQLite eraser's decisions: which jobs count as a student's (the legacy scopes' range
and where it ends), when a job is deleted and what `delete` answers, what an erased
event's record becomes and when it is stamped, and an unreadable store reported as
unavailable, naming what failed."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from shared.adapters.embedded.assignment_store import SqliteAssignmentStore, SqliteTally
from shared.adapters.embedded.erasure import SqliteJobEraser
from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.processed_events import SqliteProcessedEvents
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.domain.erasure import RECORDING_SUBSCRIBERS, TOMBSTONE
from shared.domain.errors import DependencyUnavailable
from shared.domain.job import GradingRequest, Job
from tests.contract.test_assignment_store_contract import assignment
from tests.contract.test_job_eraser_contract import Backend, graded
from tests.contract.test_job_store_contract import T0
from tests.contract.test_legacy_owner_contract import store_as_before

#: A tombstone as the stores write records: compact JSON.
STORED_TOMBSTONE = '{"erased":true}'


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "jobs.sqlite3"


@pytest.fixture
def backend(path: Path) -> Backend:
    db = SqliteDatabase(path)
    jobs = SqliteJobStore(db, on_write=SqliteTally(db).record)
    return Backend(jobs, SqliteAssignmentStore(db), SqliteJobEraser(db), SqliteProcessedEvents(db))


def rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    """Read the file as another process would."""
    other = sqlite3.connect(path)
    try:
        return other.execute(sql).fetchall()
    finally:
        other.close()


def request(n: int, student: str | None) -> GradingRequest:
    return GradingRequest(f"s{n}", "x", "light", 10.0, student_id=student)


# --- a student's jobs ------------------------------------------------------------------


def test_a_student_s_jobs_reach_every_user_scope_of_the_school_and_stop_at_its_end(
    backend: Backend,
) -> None:
    # The legacy range is every client id that starts "client-a:user:"; the first id
    # past it ("client-a:user;") is another client's, whatever student it names.
    store_as_before(backend.jobs, "teachers", "client-a:user:tess", request(1, "ada"))
    store_as_before(backend.jobs, "last-user", "client-a:user:~~~", request(2, "ada"))
    store_as_before(backend.jobs, "past-the-end", "client-a:user;", request(3, "ada"))
    store_as_before(backend.jobs, "further", "client-a:userbase", request(4, "ada"))
    store_as_before(backend.jobs, "before-it", "client-a:user", request(5, "ada"))
    found = backend.eraser.jobs_of_student("client-a", "ada", 10)
    assert [j.id for j in found] == ["last-user", "teachers"]


# --- deleting one job ------------------------------------------------------------------


def test_a_final_job_as_read_is_deleted_and_its_round_moved_back(backend: Backend) -> None:
    backend.assignments.create(assignment())
    ada = graded(backend, 1, "ada", 4.0)
    graded(backend, 2, "bob", 9.0)
    assert backend.eraser.delete(ada) is True
    assert backend.jobs.get(ada.id) is None
    after = backend.assignments.tally("a-1", 0)
    assert (after.total, after.scored, after.score_sum) == (1, 1, 9.0)


def test_a_job_not_stored_is_not_deleted(backend: Backend) -> None:
    never_stored = Job.new("nowhere", "client-a", request(1, "ada"), "fp", T0)
    assert backend.eraser.delete(never_stored) is False


def test_a_final_job_changed_since_it_was_read_is_left_alone(backend: Backend) -> None:
    backend.assignments.create(assignment())
    job = graded(backend, 1, "ada", 4.0)
    stale = dataclasses.replace(job, updated_at=job.updated_at - timedelta(seconds=1))
    assert backend.eraser.delete(stale) is False
    assert backend.jobs.get(job.id) == job
    assert backend.assignments.tally("a-1", 0).total == 1


def test_a_job_not_final_is_left_alone_even_as_read(backend: Backend) -> None:
    job = Job.new("pending", "client-a", request(1, "ada"), "fp", T0)
    backend.jobs.create(job)
    stored = backend.jobs.get(job.id)
    assert stored is not None and stored.updated_at == job.updated_at
    assert backend.eraser.delete(stored) is False
    assert backend.jobs.get(job.id) == stored


# --- the records of a job's events -------------------------------------------------------


def test_no_event_ids_forget_nothing(backend: Backend, path: Path) -> None:
    assert backend.eraser.forget_events([]) == 0
    assert rows(path, "SELECT * FROM processed_events") == []


def test_an_event_nobody_recorded_yet_is_left_a_tombstone_stamped_now(
    backend: Backend, path: Path
) -> None:
    before = datetime.now(UTC)
    assert backend.eraser.forget_events(["ev-1"]) == 0  # nothing was recorded to forget
    after = datetime.now(UTC)
    for subscriber in RECORDING_SUBSCRIBERS:
        assert backend.processed.contains(subscriber, "ev-1")
        assert backend.processed.add(subscriber, "ev-1", {"job_id": "j"}) is False
    stored = rows(path, "SELECT subscriber, record, processed_at FROM processed_events")
    assert sorted((s, r) for s, r, _ in stored) == [
        ("analytics", STORED_TOMBSTONE),
        ("notification", STORED_TOMBSTONE),
    ]
    for _, _, stamp in stored:
        at = datetime.fromisoformat(str(stamp))
        assert at.utcoffset() == timedelta(0)
        assert before <= at <= after


def test_a_record_already_a_tombstone_is_not_forgotten_again(backend: Backend) -> None:
    # Written as the stores write every record (compact JSON), it is what erasure leaves.
    assert backend.processed.add("analytics", "ev-1", dict(TOMBSTONE)) is True
    assert backend.processed.add("notification", "ev-2", {"job_id": "j"}) is True
    assert backend.eraser.forget_events(["ev-1", "ev-2"]) == 1
    assert backend.eraser.forget_events(["ev-1", "ev-2"]) == 0


# --- an unreadable store -------------------------------------------------------------------


def drop(path: Path, table: str) -> None:
    """Another process drops a table after the eraser made it."""
    other = sqlite3.connect(path, isolation_level=None)
    other.execute(f"DROP TABLE {table}")
    other.close()


PENDING = Job.new("job-1", "client-a", request(1, "ada"), "fp", T0)
OPERATIONS: dict[str, tuple[Callable[[SqliteJobEraser], object], str, str]] = {
    "jobs_of_student": (
        lambda e: e.jobs_of_student("client-a", "ada", 10),
        "find a student's jobs",
        "jobs",
    ),
    "delete": (lambda e: e.delete(PENDING), "delete a job", "jobs"),
    "forget_events": (lambda e: e.forget_events(["ev-1"]), "forget events", "processed_events"),
}


@pytest.mark.parametrize("name", OPERATIONS)
def test_an_unreadable_store_is_unavailable_naming_what_failed(
    backend: Backend, path: Path, name: str
) -> None:
    operation, what, table = OPERATIONS[name]
    drop(path, table)
    assert isinstance(backend.eraser, SqliteJobEraser)
    with pytest.raises(DependencyUnavailable) as raised:
        operation(backend.eraser)
    assert raised.value.detail == f"embedded store: {what} failed: no such table: {table}"


def test_a_round_s_counters_gone_leave_the_job_and_say_which_table_is_missing(
    backend: Backend, path: Path
) -> None:
    backend.assignments.create(assignment())
    job = graded(backend, 1, "ada", 4.0)
    drop(path, "assignment_tallies")
    with pytest.raises(DependencyUnavailable) as raised:
        backend.eraser.delete(job)
    detail = "embedded store: delete a job failed: no such table: assignment_tallies"
    assert raised.value.detail == detail
    assert backend.jobs.get(job.id) == job  # rolled back with the tally


def test_records_kept_without_a_stamp_column_fail_naming_table_and_column(
    backend: Backend, path: Path
) -> None:
    # Another process keeps its records in a table of another form: the tombstones
    # replace what is recorded, then cannot be added for the rest.
    drop(path, "processed_events")
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("CREATE TABLE processed_events (subscriber, event_id, record)")
    other.close()
    with pytest.raises(DependencyUnavailable) as raised:
        backend.eraser.forget_events(["ev-1"])
    assert raised.value.detail == (
        "embedded store: forget events failed: table processed_events has no column named"
        " processed_at"
    )
