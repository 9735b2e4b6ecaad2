"""The SQLite job store's decisions: the counts it answers per client, and an unreadable
store reported as unavailable, naming what failed."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from shared.adapters.embedded.job_store import SqliteJobStore, _sortable
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.clock import FrozenClock
from shared.domain.admission import ActiveCounts, AdmissionLimits
from shared.domain.errors import BacklogFull, DependencyUnavailable
from shared.domain.job import GradingRequest, Job
from shared.domain.status import JobStatus
from shared.ports import JobCursor, JobFilter, JobQuery

CLOCK = FrozenClock()
REQUEST = GradingRequest("s", "an answer", ("c1",), 1)
LIMITS = AdmissionLimits(per_client=10, backlog=10)


def new_job(job_id: str, client_id: str) -> Job:
    return Job.new(job_id, client_id, REQUEST, "fp", CLOCK.now())


def test_the_active_jobs_of_a_client_are_its_own(tmp_path: Path) -> None:
    store = SqliteJobStore(SqliteDatabase(tmp_path / "j.db"))
    store.create(new_job("job-1", "client-a"))
    store.create(new_job("job-2", "client-a"))
    store.create(new_job("job-3", "client-b"))
    assert store.active_jobs_of("client-a") == 2
    assert store.active_jobs_of("client-b") == 1
    assert store.active_jobs_of("client-c") == 0


def test_the_counts_hold_the_clients_and_the_whole_backlog_zero_before_any_job(
    tmp_path: Path,
) -> None:
    store = SqliteJobStore(SqliteDatabase(tmp_path / "j.db"))
    assert store.active_counts("client-a") == ActiveCounts(0, 0)
    store.create(new_job("job-1", "client-a"))
    store.create(new_job("job-2", "client-b"))
    assert store.active_counts("client-a") == ActiveCounts(1, 2)
    assert store.active_counts("client-c") == ActiveCounts(0, 2)


def test_a_backlog_of_one_admits_the_first_job_and_refuses_the_next(tmp_path: Path) -> None:
    store = SqliteJobStore(SqliteDatabase(tmp_path / "j.db"))
    one = AdmissionLimits(per_client=10, backlog=1)
    assert store.create(new_job("job-1", "client-a"), one)[1] is True
    with pytest.raises(BacklogFull):
        store.create(new_job("job-2", "client-b"), one)
    assert store.active_counts("client-b") == ActiveCounts(0, 1)


@pytest.fixture
def far_from_utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process's local time zone set to UTC+05:30 (a POSIX rule: no tz database)."""
    monkeypatch.setenv("TZ", "GQT-5:30")
    time.tzset()
    try:
        assert time.timezone == -(5 * 3600 + 30 * 60)
        yield
    finally:
        monkeypatch.undo()  # the zone the process had
        time.tzset()


@pytest.mark.usefixtures("far_from_utc")
def test_stored_moments_are_utc_whatever_the_hosts_time_zone() -> None:
    moment = datetime(2026, 3, 1, 23, 30, tzinfo=UTC)
    assert _sortable(moment) == "2026-03-01T23:30:00.000000+00:00"


def test_a_record_is_stored_as_compact_json(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    SqliteJobStore(SqliteDatabase(path)).create(new_job("job-1", "client-a"))
    reader = sqlite3.connect(path)
    try:
        (record,) = reader.execute("SELECT record FROM jobs WHERE id = 'job-1'").fetchone()
    finally:
        reader.close()
    assert record == json.dumps(json.loads(record), separators=(",", ":"))


def test_a_ping_of_an_unreadable_store_is_unavailable_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    store = SqliteJobStore(SqliteDatabase(path))
    store.ping()
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("DROP TABLE jobs")
    other.close()
    with pytest.raises(DependencyUnavailable) as raised:
        store.ping()
    assert raised.value.detail == "embedded store: ping failed: no such table: jobs"


def without_tables(tmp_path: Path) -> SqliteJobStore:
    """A store whose tables another process dropped after it opened them."""
    path = tmp_path / "j.db"
    store = SqliteJobStore(SqliteDatabase(path))
    store.create(new_job("job-1", "client-a"))
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("DROP TABLE jobs")
    other.execute("DROP TABLE job_counters")
    other.close()
    return store


LATER = CLOCK.now()
OPERATIONS: dict[str, tuple[Callable[[SqliteJobStore], object], str]] = {
    "create": (lambda s: s.create(new_job("job-2", "client-a")), "create job"),
    "admit": (lambda s: s.admit(new_job("job-2", "client-a")), "create job"),
    "list": (lambda s: s.list_jobs(JobQuery("client-a", 10)), "list jobs"),
    "counts": (lambda s: s.active_counts("client-a"), "read counters"),
    "get": (lambda s: s.get("job-1"), "read job"),
    "update": (lambda s: s.update("job-1", lambda j: j), "update job"),
    "reopen": (lambda s: s.reopen("job-1", lambda j: j, LIMITS), "reopen job"),
    "update_each": (lambda s: s.update_each({"job-1": lambda j: j}), "update jobs"),
    "find": (lambda s: s.find(JobStatus.PENDING, LATER, 10), "find jobs"),
    "unannounced": (lambda s: s.find_unannounced(LATER, 10), "find unannounced jobs"),
    "find_jobs": (lambda s: s.find_jobs(JobFilter(), 10), "list jobs"),
    "count": (lambda s: s.count_by_status(10), "count jobs"),
    "completed": (lambda s: s.completed_between(LATER, LATER, 10), "find completed jobs"),
}


@pytest.mark.parametrize("name", OPERATIONS)
def test_an_unreadable_store_is_unavailable_naming_what_failed(tmp_path: Path, name: str) -> None:
    operation, what = OPERATIONS[name]
    store = without_tables(tmp_path)
    with pytest.raises(DependencyUnavailable) as raised:
        operation(store)
    table = "job_counters" if name == "counts" else "jobs"
    assert raised.value.detail == f"embedded store: {what} failed: no such table: {table}"


def test_counters_that_cannot_be_seeded_leave_the_store_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    SqliteJobStore(SqliteDatabase(path))
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("DELETE FROM job_counters")  # as made before the counters existed
    other.execute(
        "CREATE TRIGGER refuse BEFORE INSERT ON job_counters"
        " BEGIN SELECT RAISE(ABORT, 'disk refused'); END"
    )
    other.close()
    with pytest.raises(DependencyUnavailable) as raised:
        SqliteJobStore(SqliteDatabase(path))
    assert raised.value.detail == "embedded store: seed counters failed: disk refused"


def test_counters_that_cannot_be_read_leave_the_store_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("CREATE VIEW job_counters AS SELECT 0 AS active")  # not the counters
    other.close()
    with pytest.raises(DependencyUnavailable) as raised:
        SqliteJobStore(SqliteDatabase(path))
    assert raised.value.detail == "embedded store: seed counters failed: no such column: scope"


def _stored_a_second_apart(store: SqliteJobStore, n: int) -> list[Job]:
    clock = FrozenClock(CLOCK.now())
    jobs = []
    for i in range(n):
        job = Job.new(f"job-{i}", "client-a", REQUEST, "fp", clock.now())
        store.create(job)
        jobs.append(job)
        clock.advance(timedelta(seconds=1))
    return jobs


def test_a_scan_after_a_moment_alone_skips_every_job_of_that_moment(tmp_path: Path) -> None:
    store = SqliteJobStore(SqliteDatabase(tmp_path / "j.db"))
    jobs = _stored_a_second_apart(store, 3)
    end = jobs[-1].updated_at + timedelta(seconds=1)
    after = store.find(JobStatus.PENDING, end, 10, updated_after=jobs[0].updated_at)
    assert [j.id for j in after] == ["job-1", "job-2"]


def test_a_scan_given_an_id_without_a_moment_ignores_the_id(tmp_path: Path) -> None:
    store = SqliteJobStore(SqliteDatabase(tmp_path / "j.db"))
    jobs = _stored_a_second_apart(store, 2)
    end = jobs[-1].updated_at + timedelta(seconds=1)
    found = store.find(JobStatus.PENDING, end, 10, after_id="job-0")
    assert [j.id for j in found] == ["job-0", "job-1"]


def with_jobs_table(tmp_path: Path, columns: str) -> SqliteJobStore:
    """A store whose jobs table another process replaced by one of only `columns`."""
    path = tmp_path / "j.db"
    store = SqliteJobStore(SqliteDatabase(path))
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("DROP TABLE jobs")
    other.execute(f"CREATE TABLE jobs ({columns})")
    other.close()
    return store


@pytest.mark.parametrize("paged", [False, True])
def test_a_scan_of_a_table_without_ids_names_the_missing_column(
    tmp_path: Path, paged: bool
) -> None:
    store = with_jobs_table(tmp_path, "record TEXT, status TEXT, updated_at TEXT")
    page = {"updated_after": LATER, "after_id": "job-0"} if paged else {}
    with pytest.raises(DependencyUnavailable) as raised:
        store.find(JobStatus.PENDING, LATER, 10, **page)  # type: ignore[arg-type]
    assert raised.value.detail == "embedded store: find jobs failed: no such column: id"


@pytest.mark.parametrize(
    ("where", "after", "missing"),
    [
        (JobFilter(status=JobStatus.PENDING), None, "status"),
        (JobFilter(client_id="client-a"), None, "client_id"),
        (JobFilter(assignment_id="asg-1"), None, "assignment_id"),
        (JobFilter(created_from=LATER), None, "created_at"),
        (JobFilter(created_to=LATER), None, "created_at"),
        (JobFilter(), JobCursor(LATER, "job-1"), "created_at"),
        (JobFilter(), None, "created_at"),
    ],
)
def test_a_listing_of_a_table_without_its_columns_names_the_first_missing(
    tmp_path: Path, where: JobFilter, after: JobCursor | None, missing: str
) -> None:
    store = with_jobs_table(tmp_path, "record TEXT")
    with pytest.raises(DependencyUnavailable) as raised:
        store.find_jobs(where, 10, after)
    assert raised.value.detail == f"embedded store: list jobs failed: no such column: {missing}"


def test_a_listing_of_a_table_without_ids_names_the_id_column(tmp_path: Path) -> None:
    store = with_jobs_table(tmp_path, "record TEXT, created_at TEXT")
    for after in (None, JobCursor(LATER, "job-1")):
        with pytest.raises(DependencyUnavailable) as raised:
            store.find_jobs(JobFilter(), 10, after)
        assert raised.value.detail == "embedded store: list jobs failed: no such column: id"


def test_a_school_lists_its_jobs_stored_under_a_user_scope_and_no_neighbours(
    tmp_path: Path,
) -> None:
    # Jobs stored under `<school>:user:<uid>` are the school's, its user's the author's; a
    # school whose id only starts like that scope ("acme:userb", "acme:user;x") is another.
    store = SqliteJobStore(SqliteDatabase(tmp_path / "j.db"))
    for job_id, client_id in [
        ("job-own", "acme"),
        ("job-alice", "acme:user:alice"),
        ("job-bob", "acme:user:bob"),
        ("job-b", "acme:userb"),
        ("job-semi", "acme:user;x"),
        ("job-other", "acmf"),
    ]:
        store.create(new_job(job_id, client_id))
    listed = {job.id for job in store.list_jobs(JobQuery("acme", 10))}
    assert listed == {"job-own", "job-alice", "job-bob"}
    by_alice = store.list_jobs(JobQuery("acme", 10, author="alice"))
    assert [job.id for job in by_alice] == ["job-alice"]
    assert {job.id for job in store.list_jobs(JobQuery("acme:userb", 10))} == {"job-b"}
