"""The review and erasure services on each backend: a grade held after review is released
with one GradingCompleted and one GradeReviewed, reviewers stay within their client, and
the student's erasure removes the job and its place in the tally."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from shared.adapters.embedded.assignment_store import SqliteAssignmentStore, SqliteTally
from shared.adapters.embedded.erasure import SqliteJobEraser
from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.review_store import SqliteReviewQueue
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.clock import FrozenClock
from shared.domain.authorization import Principal, Role
from shared.domain.errors import JobNotFound
from shared.domain.events import GradeReviewed, GradingCompleted
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest, Job
from shared.domain.review import Release, ReviewPolicy, hold_state
from shared.ports import AssignmentStore, JobEraser, JobStore, ReviewQueue
from shared.service_layer.completion import announce
from shared.service_layer.erasure import ErasureService
from shared.service_layer.review import Override, ReviewService, agreement_report
from tests.contract.test_assignment_store_contract import assignment
from tests.fakes import FakePublisher

LEASE = timedelta(seconds=30)


@dataclass
class Backend:
    jobs: JobStore
    assignments: AssignmentStore
    queue: ReviewQueue
    eraser: JobEraser


@pytest.fixture(params=["embedded", "google"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "embedded":
        db = SqliteDatabase(tmp_path / "jobs.sqlite3")
        jobs = SqliteJobStore(db, on_write=SqliteTally(db).record)
        return Backend(jobs, SqliteAssignmentStore(db), SqliteReviewQueue(db), SqliteJobEraser(db))
    from shared.adapters.google.assignment_store import FirestoreAssignmentStore, FirestoreTally
    from shared.adapters.google.erasure import FirestoreJobEraser
    from shared.adapters.google.job_store import FirestoreJobStore
    from shared.adapters.google.review_store import FirestoreReviewQueue

    client: Any = request.getfixturevalue("firestore_clean")
    tally = FirestoreTally(client, "assignment_tallies")
    store = FirestoreJobStore(client, "grading_jobs", timedelta(days=30), on_write=tally.record)
    return Backend(
        store,
        FirestoreAssignmentStore(client),
        FirestoreReviewQueue(client, "grading_jobs"),
        FirestoreJobEraser(client, "grading_jobs", "assignment_tallies", "processed_events"),
    )


def test_held_reviewed_and_erased_on_each_backend(backend: Backend) -> None:
    clock = FrozenClock()
    publisher = FakePublisher()
    backend.assignments.create(assignment())
    policy = ReviewPolicy(pass_mark=5, margin=1, release=Release.AFTER_REVIEW)
    request = GradingRequest(
        "s1", "an answer", "light", 10.0, assignment_id="a-1", rubric_version=1, student_id="ada"
    )
    now = clock.now()
    backend.jobs.create(Job.new("job-1", "client-a", request, "fp", now))
    backend.jobs.update("job-1", lambda j: j.claim("w", now, LEASE))
    result = GradeResult(5.5, 10, "ok", model="m", prompt_version="grading-v1")
    held = hold_state(policy, "job-1", 0, result, now)
    assert held is not None
    job = backend.jobs.update("job-1", lambda j: j.succeed("w", result, now).hold(held))
    announce(job, backend.jobs, publisher, clock)
    assert publisher.events == []  # withheld until the review

    reviews = ReviewService(backend.jobs, backend.queue, publisher, clock)
    assert [j.id for j in reviews.held("client-a", "a-1", 10).jobs] == ["job-1"]
    with pytest.raises(JobNotFound):
        reviews.get("client-b", "job-1")
    reviews.decide(
        Principal("client-a", "key:ms", Role.REVIEWER), "job-1", "generous", Override(7.0)
    )
    reviews.decide(
        Principal("client-a", "key:ms", Role.REVIEWER), "job-1", "generous", Override(7.0)
    )  # a second review
    completed = [e for e in publisher.events if isinstance(e, GradingCompleted)]
    reviewed = [e for e in publisher.events if isinstance(e, GradeReviewed)]
    assert [e.score for e in completed] == [7.0]
    assert [e.review for e in reviewed] == [1, 2]
    report = agreement_report(backend.queue, "client-a", "a-1")
    assert (report.overall.reviewed, report.pairs) == (1, [(5.5, 7.0)])

    erasure = ErasureService(backend.jobs, backend.eraser, None, clock)
    erased = erasure.erase_student("client-a", "ada")
    assert erased.jobs == ["job-1"] and erased.reviews == 2
    assert backend.jobs.get("job-1") is None
    assert backend.assignments.tally("a-1", 0).total == 0
    assert reviews.held("client-a", None, 10).jobs == []
