"""What every backend's JobEraser guarantees: a student's jobs found, a final job deleted with
its tally moved back in the same commit, a job that changed meanwhile left alone, and the
subscribers' records of its events left as tombstones."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol

import pytest

from shared.adapters.embedded.assignment_store import SqliteAssignmentStore, SqliteTally
from shared.adapters.embedded.erasure import SqliteJobEraser
from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.processed_events import SqliteProcessedEvents
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.domain.erasure import event_ids_of
from shared.domain.grade import GradeResult
from shared.domain.ids import completion_event_id
from shared.domain.job import GradingRequest, Job
from shared.ports import AssignmentStore, EventRecords, JobEraser, JobStore, ProcessedEvents
from tests.contract.test_assignment_store_contract import assignment
from tests.contract.test_job_store_contract import T0

LEASE = timedelta(seconds=30)


class RecordedEvents(ProcessedEvents, EventRecords, Protocol):
    """The processed events of a subscriber, whose records the test reads back."""


@dataclass
class Backend:
    jobs: JobStore
    assignments: AssignmentStore
    eraser: JobEraser
    processed: RecordedEvents


@pytest.fixture(params=["embedded", "google"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "embedded":
        db = SqliteDatabase(tmp_path / "jobs.sqlite3")
        jobs = SqliteJobStore(db, on_write=SqliteTally(db).record)
        return Backend(
            jobs, SqliteAssignmentStore(db), SqliteJobEraser(db), SqliteProcessedEvents(db)
        )
    from shared.adapters.google.assignment_store import FirestoreAssignmentStore, FirestoreTally
    from shared.adapters.google.erasure import FirestoreJobEraser
    from shared.adapters.google.job_store import FirestoreJobStore
    from shared.adapters.google.processed_events import FirestoreProcessedEvents

    client: Any = request.getfixturevalue("firestore_clean")
    ttl = timedelta(days=30)
    tally = FirestoreTally(client, "assignment_tallies")
    store = FirestoreJobStore(client, "grading_jobs", ttl, on_write=tally.record)
    eraser = FirestoreJobEraser(client, "grading_jobs", "assignment_tallies", "processed_events")
    processed = FirestoreProcessedEvents(client, "processed_events", ttl)
    return Backend(store, FirestoreAssignmentStore(client), eraser, processed)


def graded(backend: Backend, n: int, student: str, score: float) -> Job:
    request = GradingRequest(
        f"s{n}", "x", "light", 10.0, assignment_id="a-1", rubric_version=1, student_id=student
    )
    job_id = f"job-{n}"
    backend.jobs.create(Job.new(job_id, "client-a", request, "fp", T0))
    backend.jobs.update(job_id, lambda j: j.claim("w", T0, LEASE))
    return backend.jobs.update(job_id, lambda j: j.succeed("w", GradeResult(score, 10, "ok"), T0))


def test_a_students_final_job_goes_with_its_tally_and_dedup_records(backend: Backend) -> None:
    backend.assignments.create(assignment())
    ada = graded(backend, 1, "ada", 4.0)
    graded(backend, 2, "bob", 9.0)
    [event_id] = event_ids_of(ada)
    backend.processed.add("notifier", event_id, {"job_id": ada.id})
    backend.processed.add("analytics", event_id, {"job_id": ada.id})
    before = backend.assignments.tally("a-1", 0)
    assert (before.total, before.scored, before.score_sum) == (2, 2, 13.0)

    assert [j.id for j in backend.eraser.jobs_of_student("client-a", "ada", 10)] == [ada.id]
    assert backend.eraser.jobs_of_student("client-b", "ada", 10) == []
    assert backend.eraser.delete(ada) is True
    assert backend.jobs.get(ada.id) is None
    after = backend.assignments.tally("a-1", 0)
    assert (after.total, after.scored, after.score_sum) == (1, 1, 9.0)
    assert sum(after.histogram) == 1
    assert backend.eraser.forget_events([event_id]) == 2
    # What is left is a tombstone: no record, and a late delivery is a duplicate.
    assert backend.processed.records("analytics") == []
    assert backend.processed.records("notifier") == []
    assert backend.processed.contains("notifier", event_id)
    assert backend.processed.add("analytics", event_id, {"job_id": ada.id}) is False
    assert backend.eraser.forget_events([event_id]) == 0
    assert backend.eraser.delete(ada) is False  # already gone: nothing moves twice
    assert backend.assignments.tally("a-1", 0).total == 1


def test_a_job_that_changed_since_it_was_read_is_left_alone(backend: Backend) -> None:
    backend.assignments.create(assignment())
    job = graded(backend, 1, "ada", 4.0)
    stale = dataclasses.replace(job, updated_at=job.updated_at - timedelta(seconds=1))
    assert backend.eraser.delete(stale) is False
    assert backend.jobs.get(job.id) is not None
    assert backend.assignments.tally("a-1", 0).total == 1


def test_every_generations_events_become_tombstones_recorded_or_not(backend: Backend) -> None:
    """A regraded job: the first generation's record and the regrade's both go, and the
    regrade's event, not yet delivered when the job is erased, is never recorded after."""
    backend.assignments.create(assignment())
    job = graded(backend, 1, "ada", 4.0)
    job = backend.jobs.update(job.id, lambda j: j.mark_event_published(T0))
    first, *_ = event_ids_of(job)
    backend.processed.add("analytics", first, {"job_id": job.id, "generation": 0})
    regraded = backend.jobs.update(job.id, lambda j: j.regrade(T0, j.request))
    regraded = backend.jobs.update(job.id, lambda j: j.claim("w", T0, LEASE))
    regraded = backend.jobs.update(job.id, lambda j: j.succeed("w", GradeResult(6.0, 10, "ok"), T0))
    second = completion_event_id(job.id, regraded.replayed_generation)
    assert second != first and second in event_ids_of(regraded)
    backend.processed.add("analytics", second, {"job_id": job.id, "generation": 1})

    assert backend.eraser.delete(regraded) is True
    assert backend.eraser.forget_events(event_ids_of(regraded)) == 2
    assert backend.processed.records("analytics") == []
    for late in (first, second):
        for subscriber in ("analytics", "notification"):
            assert backend.processed.add(subscriber, late, {"job_id": job.id}) is False
    assert backend.processed.records("analytics") == []


def test_a_students_search_finds_their_jobs_stored_before_authors(backend: Backend) -> None:
    """Jobs stored in the old form (client id `<school>:user:<uid>`, no author): the
    student's own (their user id the student id, or no student id at all), and a teacher's
    for the student; not another school's, nor another student's."""
    from tests.contract.test_legacy_owner_contract import store_as_before

    def request(n: int, student: str | None) -> GradingRequest:
        return GradingRequest(f"s{n}", "x", "light", 10.0, student_id=student)

    store_as_before(backend.jobs, "own", "client-a:user:ada", request(1, "ada"))
    store_as_before(backend.jobs, "own-unnamed", "client-a:user:ada", request(2, None))
    store_as_before(backend.jobs, "teachers", "client-a:user:tess", request(3, "ada"))
    store_as_before(backend.jobs, "other-student", "client-a:user:tess", request(4, "bo"))
    store_as_before(backend.jobs, "other-school", "client-a-b:user:ada", request(5, "ada"))
    backend.jobs.create(Job.new("new", "client-a", request(6, "ada"), "fp", T0, author="ada"))
    found = backend.eraser.jobs_of_student("client-a", "ada", 10)
    assert sorted(j.id for j in found) == ["new", "own", "own-unnamed", "teachers"]
    assert all(j.client_id == "client-a" for j in found)
