"""What every assignment backend must guarantee: versioned rubrics, client pages, batches
created once, tallies moved by the jobs' own writes, and one AssignmentGraded per round."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from shared.adapters.embedded.assignment_store import (
    SqliteAssignmentStore,
    SqliteJobBatch,
    SqliteTally,
)
from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.domain.admission import AdmissionLimits
from shared.domain.assignment import Assignment
from shared.domain.errors import AssignmentNotFound, TooManyActiveJobs
from shared.domain.events import AssignmentGraded
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest, Job
from shared.domain.status import JobStatus
from shared.ports import AssignmentStore, JobBatchWriter, JobStore
from tests.contract.test_job_store_contract import T0

LEASE = timedelta(seconds=30)


@dataclass
class Backend:
    jobs: JobStore
    assignments: AssignmentStore
    batch: JobBatchWriter


@pytest.fixture(params=["embedded", "google"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """The job store with its tally hook, the assignment store and the batch writer."""
    if request.param == "embedded":
        db = SqliteDatabase(tmp_path / "jobs.sqlite3")
        jobs = SqliteJobStore(db, on_write=SqliteTally(db).record)
        return Backend(jobs, SqliteAssignmentStore(db), SqliteJobBatch(db, jobs))
    from shared.adapters.google.assignment_store import FirestoreAssignmentStore, FirestoreTally
    from shared.adapters.google.job_batch import FirestoreJobBatch
    from shared.adapters.google.job_store import FirestoreJobStore

    client: Any = request.getfixturevalue("firestore_clean")
    ttl = timedelta(days=30)
    tally = FirestoreTally(client, "assignment_tallies")
    store = FirestoreJobStore(client, "grading_jobs", ttl, on_write=tally.record)
    batch = FirestoreJobBatch(client, store, tally, "grading_jobs", "grading_jobs_counters", ttl)
    return Backend(store, FirestoreAssignmentStore(client), batch)


def assignment(assignment_id: str = "a-1", client_id: str = "client-a", at: int = 0) -> Assignment:
    return Assignment.new(
        assignment_id,
        client_id,
        "Photosynthesis essay",
        ("mentions light", "mentions chlorophyll"),
        10.0,
        "v3",
        T0 + timedelta(seconds=at),
    )


def submission(n: int, round_: int = 0, assignment_id: str = "a-1", answer: str = "x") -> Job:
    request = GradingRequest(
        submission_id=f"s{n}",
        answer=answer,
        rubric="light",
        assignment_id=assignment_id,
        rubric_version=1,
        prompt_version="v3",
        assignment_round=round_,
    )
    return Job.new(f"{assignment_id}-j{n}", "client-a", request, "fp-" + answer, T0)


def finish(jobs: JobStore, job_id: str, score: float | None) -> Job:
    jobs.update(job_id, lambda j: j.claim(f"w-{job_id}", T0, LEASE))
    if score is None:
        from shared.domain.job import JobError

        error = JobError("grading-permanent", "refused")
        return jobs.update(job_id, lambda j: j.fail(f"w-{job_id}", error, T0))
    result = GradeResult(score, 10.0, "ok", (), "g")
    return jobs.update(job_id, lambda j: j.succeed(f"w-{job_id}", result, T0))


# --- the resource --------------------------------------------------------------------


def test_create_is_once_per_id_and_round_trips(backend: Backend) -> None:
    first = assignment()
    assert backend.assignments.create(first) == (first, True)
    again, created = backend.assignments.create(dataclasses.replace(first, title="other"))
    assert not created and again == first
    assert backend.assignments.get("a-1") == first
    assert backend.assignments.get("nope") is None


def test_a_revision_is_a_new_version_and_old_ones_stay_readable(backend: Backend) -> None:
    backend.assignments.create(assignment())
    later = T0 + timedelta(minutes=5)
    revised = backend.assignments.update("a-1", lambda a: a.revise("only light", later))
    assert revised.rubric.version == 2 and revised.rubric.rubric == "only light"
    stored = backend.assignments.get("a-1")
    assert stored == revised
    assert stored is not None
    v1 = stored.rubric_version(1)
    assert v1 is not None and v1.rubric == ("mentions light", "mentions chlorophyll")
    with pytest.raises(AssignmentNotFound):
        backend.assignments.update("nope", lambda a: a)


def test_a_client_lists_its_own_newest_first_in_pages(backend: Backend) -> None:
    for n in range(5):
        backend.assignments.create(assignment(f"a-{n}", at=n))
    backend.assignments.create(assignment("b-0", client_id="client-b"))
    first = backend.assignments.list_of("client-a", 3)
    assert [a.id for a in first] == ["a-4", "a-3", "a-2"]
    rest = backend.assignments.list_of("client-a", 3, (first[-1].created_at, first[-1].id))
    assert [a.id for a in rest] == ["a-1", "a-0"]
    assert [a.id for a in backend.assignments.list_of("client-b", 10)] == ["b-0"]


# --- batches -------------------------------------------------------------------------


def test_a_batch_creates_each_job_once_and_a_retry_creates_nothing(backend: Backend) -> None:
    jobs = [submission(n) for n in range(600)]  # more than one Firestore commit
    first = backend.batch.create_many(jobs[:250]).items
    assert all(created for _, created in first)
    # The retry of a batch cut off after 250: those exist, the rest are new.
    second = backend.batch.create_many(jobs).items
    assert [created for _, created in second] == [False] * 250 + [True] * 350
    assert [None if job is None else job.id for job, _ in second] == [job.id for job in jobs]
    third = backend.batch.create_many(jobs).items
    assert not any(created for _, created in third)
    assert backend.jobs.active_counts("client-a").client == 600
    assert backend.assignments.tally("a-1", 0).counts == {JobStatus.PENDING: 600}


def test_a_batch_answers_an_existing_job_with_what_is_stored(backend: Backend) -> None:
    backend.batch.create_many([submission(1, answer="first")])
    [(stored, created)] = backend.batch.create_many([submission(1, answer="second")]).items
    assert not created and stored is not None and stored.fingerprint == "fp-first"


# --- tallies -------------------------------------------------------------------------


def test_the_tally_follows_each_job_write(backend: Backend) -> None:
    backend.batch.create_many([submission(n) for n in range(4)])
    backend.jobs.create(submission(9, assignment_id="a-other"))
    finish(backend.jobs, "a-1-j0", 8.0)
    finish(backend.jobs, "a-1-j1", 6.0)
    finish(backend.jobs, "a-1-j2", None)
    backend.jobs.update("a-1-j0", lambda j: j.mark_event_published(T0))  # final to final
    tally = backend.assignments.tally("a-1", 0)
    assert tally.counts == {
        JobStatus.PENDING: 1,
        JobStatus.SUCCEEDED: 2,
        JobStatus.FAILED: 1,
    }
    assert tally.mean_score == 7.0 and tally.scored == 2
    assert tally.histogram == (0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0)  # 6 and 8 of 10
    assert not tally.done
    assert backend.assignments.tally("a-other", 0).total == 1


def test_jobs_without_an_assignment_rubric_are_not_tallied(backend: Backend) -> None:
    legacy = dataclasses.replace(
        submission(1), request=GradingRequest("s1", "x", "light", assignment_id="a-1")
    )
    backend.jobs.create(legacy)
    assert backend.assignments.tally("a-1", 0).total == 0


def test_counters_under_concurrent_finishes_count_each_job_once(backend: Backend) -> None:
    n = 12
    backend.batch.create_many([submission(i) for i in range(n)])
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            finish(backend.jobs, f"a-1-j{i}", float(i % 5))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    tally = backend.assignments.tally("a-1", 0)
    assert tally.counts == {JobStatus.SUCCEEDED: n}
    assert tally.done
    assert tally.score_sum == sum(float(i % 5) for i in range(n))


def test_a_regraded_job_counts_in_the_new_round_and_the_old_one_keeps_its_counts(
    backend: Backend,
) -> None:
    backend.batch.create_many([submission(0)])
    finish(backend.jobs, "a-1-j0", 8.0)
    backend.jobs.update("a-1-j0", lambda j: j.mark_event_published(T0))
    request = dataclasses.replace(submission(0).request, rubric_version=2, assignment_round=1)
    backend.jobs.update("a-1-j0", lambda j: j.regrade(T0, request))
    assert backend.assignments.tally("a-1", 0).counts == {JobStatus.SUCCEEDED: 1}
    assert backend.assignments.tally("a-1", 1).counts == {JobStatus.PENDING: 1}
    finish(backend.jobs, "a-1-j0", 4.0)
    assert backend.assignments.tally("a-1", 1).mean_score == 4.0


# --- the one AssignmentGraded --------------------------------------------------------


def graded(event_id: str = "e-1") -> AssignmentGraded:
    return AssignmentGraded(event_id, "a-1", "client-a", 0, 3, 2, 1, 0, 7.5, T0)


def test_one_record_per_event_id_however_many_race(backend: Backend) -> None:
    wins: list[bool] = []
    barrier = threading.Barrier(6)

    def race() -> None:
        barrier.wait()
        wins.append(backend.assignments.record_graded(graded()))

    _run_all([race] * 6)
    assert sorted(wins) == [False] * 5 + [True]
    assert backend.assignments.unpublished_graded(10) == [graded()]
    backend.assignments.mark_graded_published("e-1")
    assert backend.assignments.unpublished_graded(10) == []


def _run_all(actions: list[Callable[[], None]]) -> None:
    threads = [threading.Thread(target=a) for a in actions]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_the_last_jobs_finishing_together_announce_the_round_exactly_once(
    backend: Backend,
) -> None:
    from shared.clock import FrozenClock
    from shared.service_layer.assignment_completion import AssignmentCompletion
    from tests.fakes import FakePublisher

    backend.assignments.create(assignment())
    n = 8
    backend.batch.create_many([submission(i) for i in range(n)])
    publisher = FakePublisher()
    completion = AssignmentCompletion(backend.assignments, publisher, FrozenClock(T0))
    for i in range(n - 4):
        completion.on_final(finish(backend.jobs, f"a-1-j{i}", 5.0))
    assert publisher.events == []  # not every submission is final yet
    barrier = threading.Barrier(4)

    def last(i: int) -> Callable[[], None]:
        def run() -> None:
            job = finish(backend.jobs, f"a-1-j{i}", 7.0)
            barrier.wait()  # all four final before any looks at the tally
            completion.on_final(job)

        return run

    _run_all([last(i) for i in range(n - 4, n)])
    [event] = publisher.events
    assert isinstance(event, AssignmentGraded)
    assert (event.assignment_id, event.round, event.submissions) == ("a-1", 0, n)
    assert event.succeeded == n and event.mean_score == 6.0
    # Delivered again (a redelivered task), nothing more is published.
    completion.on_final(backend.jobs.get("a-1-j0"))  # type: ignore[arg-type]
    assert len(publisher.events) == 1
    assert backend.assignments.unpublished_graded(10) == []


def test_a_recorded_event_whose_publisher_died_is_published_by_the_sweep(
    backend: Backend,
) -> None:
    from shared.clock import FrozenClock
    from shared.service_layer.assignment_completion import AssignmentCompletion
    from tests.fakes import FakePublisher

    backend.assignments.create(assignment())
    backend.batch.create_many([submission(0)])
    publisher = FakePublisher(failures=1)
    completion = AssignmentCompletion(backend.assignments, publisher, FrozenClock(T0))
    job = finish(backend.jobs, "a-1-j0", 9.0)
    with pytest.raises(Exception, match="bus down"):
        completion.on_final(job)
    assert publisher.events == []
    assert len(completion.sweep()) == 1
    [event] = publisher.events
    assert isinstance(event, AssignmentGraded) and event.mean_score == 9.0
    assert completion.sweep() == []


def test_a_regraded_job_counts_as_not_final_again_until_it_finishes(backend: Backend) -> None:
    backend.batch.create_many([submission(0)])
    finish(backend.jobs, "a-1-j0", 8.0)
    backend.jobs.update("a-1-j0", lambda j: j.mark_event_published(T0))
    assert backend.jobs.active_counts("client-a").client == 0
    request = dataclasses.replace(submission(0).request, assignment_round=1)
    backend.jobs.update("a-1-j0", lambda j: j.regrade(T0, request))
    assert backend.jobs.active_counts("client-a").client == 1
    finish(backend.jobs, "a-1-j0", 4.0)
    assert backend.jobs.active_counts("client-a").client == 0


def test_a_firestore_batch_of_1000_takes_three_commits_and_one_read_per_answer(
    request: pytest.FixtureRequest,
) -> None:
    from shared.adapters.google import metering
    from shared.adapters.google.assignment_store import FirestoreAssignmentStore, FirestoreTally
    from shared.adapters.google.job_batch import FirestoreJobBatch
    from shared.adapters.google.job_store import FirestoreJobStore

    client: Any = request.getfixturevalue("firestore_clean")
    ttl = timedelta(days=30)
    tally = FirestoreTally(client, "assignment_tallies")
    store = FirestoreJobStore(client, "grading_jobs", ttl, on_write=tally.record)
    writer = FirestoreJobBatch(client, store, tally, "grading_jobs", "grading_jobs_counters", ttl)
    commits: list[int] = []
    make_batch = client.batch

    def counting_batch() -> Any:
        batch = make_batch()
        commit = batch.commit

        def counted(*args: Any, **kwargs: Any) -> Any:
            commits.append(len(batch))
            return commit(*args, **kwargs)

        batch.commit = counted
        return batch

    client.batch = counting_batch
    try:
        results = writer.create_many([submission(i) for i in range(1000)]).items
    finally:
        client.batch = make_batch
    assert all(created for _, created in results)
    assert commits == [480 + 2, 480 + 2, 40 + 2]  # the jobs, the client's backlog shard, tally
    assert max(commits) <= 500
    assert writer.meter.snapshot() == {
        metering.FIRESTORE_READS: 1000,
        metering.FIRESTORE_WRITES: 1006,
    }
    assert FirestoreAssignmentStore(client).tally("a-1", 0).counts == {JobStatus.PENDING: 1000}


def test_a_batch_creates_no_more_new_jobs_than_the_ceilings_admit(backend: Backend) -> None:
    backend.batch.create_many([submission(3)])
    limits = AdmissionLimits(per_client=3, backlog=100)
    created = backend.batch.create_many([submission(n) for n in range(6)], limits)
    assert isinstance(created.refusal, TooManyActiveJobs)
    assert [(job.id if job else None, made) for job, made in created.items] == [
        ("a-1-j0", True),
        ("a-1-j1", True),
        (None, False),
        ("a-1-j3", False),  # it existed: answered whatever the capacity
        (None, False),
        (None, False),
    ]
    assert backend.jobs.get("a-1-j2") is None
    assert backend.jobs.active_counts("client-a").client == 3
    assert backend.assignments.tally("a-1", 0).total == 3


def _store_as_before(backend: Backend, made: Assignment) -> None:
    """Write an assignment exactly as the stores did before authors: no `author` field."""
    backend.assignments.create(made)
    if isinstance(backend.assignments, SqliteAssignmentStore):
        with backend.assignments._db.transaction() as conn:
            conn.execute(
                "UPDATE assignments SET record = json_remove(record, '$.author') WHERE id = ?",
                (made.id,),
            )
        return
    from google.cloud import firestore

    document = backend.assignments._assignments.document(made.id)  # type: ignore[attr-defined]
    document.update({"author": firestore.DELETE_FIELD})


def test_the_schools_list_holds_its_users_assignments_from_before(backend: Backend) -> None:
    """Assignments a signed-in user made in their scope before objects had an author
    (client id `<school>:user:<uid>`) are listed with the school's, page after page, and
    stay there once written again; a lookalike school's are not."""
    _store_as_before(backend, assignment("old-1", "client-a:user:tess", at=0))
    _store_as_before(backend, assignment("old-x", "client-a-b:user:tess", at=1))
    for n in (2, 3):
        backend.assignments.create(assignment(f"new-{n}", "client-a", at=n))
    _store_as_before(backend, assignment("old-4", "client-a:user:ula", at=4))
    seen: list[str] = []
    after = None
    while True:
        page = backend.assignments.list_of("client-a", 2, after)
        seen += [a.id for a in page]
        if len(page) < 2:
            break
        after = (page[-1].created_at, page[-1].id)
    assert seen == ["old-4", "new-3", "new-2", "old-1"]
    assert [a.client_id for a in backend.assignments.list_of("client-a", 10)] == ["client-a"] * 4
    backend.assignments.update("old-1", lambda a: a)
    listed = [a.id for a in backend.assignments.list_of("client-a", 10)]
    assert listed == ["old-4", "new-3", "new-2", "old-1"]
