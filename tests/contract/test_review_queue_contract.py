"""The review queue every backend answers alike: held grades of one client, oldest hold first,
by assignment, in cursor pages; reviewed grades apart; a review kept beside the model's grade."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.review_store import SqliteReviewQueue
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest, Job
from shared.domain.review import (
    HoldReason,
    Release,
    Review,
    ReviewDecision,
    ReviewState,
    ReviewStatus,
)
from shared.ports import JobStore, ReviewCursor, ReviewQueue

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=30)


@pytest.fixture(params=["embedded", "google"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[JobStore, ReviewQueue]:
    if request.param == "embedded":
        db = SqliteDatabase(tmp_path / "jobs.sqlite3")
        return SqliteJobStore(db), SqliteReviewQueue(db)
    from shared.adapters.google.review_store import FirestoreReviewQueue

    store: Any = request.getfixturevalue("firestore_job_store")
    client = request.getfixturevalue("firestore_clean")
    return store, FirestoreReviewQueue(client, "grading_jobs")


def held(
    store: JobStore, job_id: str, minute: int, client: str = "client-a", assignment: str = "hw-1"
) -> Job:
    request = GradingRequest("s-" + job_id, "an answer", "r", assignment_id=assignment)
    store.create(Job.new(job_id, client, request, "fp", T0))
    at = T0 + timedelta(minutes=minute)
    store.update(job_id, lambda j: j.claim("w", at - timedelta(seconds=5), LEASE))
    state = ReviewState(
        ReviewStatus.HELD, (HoldReason.SAMPLED,), Release.AFTER_REVIEW, at, generation=0
    )
    return store.update(
        job_id,
        lambda j: j.succeed("w", GradeResult(4, 10, "ok", confidence=0.4), at).hold(state),
    )


def ids(jobs: list[Job]) -> list[str]:
    return [j.id for j in jobs]


def test_held_grades_come_oldest_first_in_pages_and_per_client(
    backend: tuple[JobStore, ReviewQueue],
) -> None:
    store, queue = backend
    for n, minute in enumerate([3, 1, 2, 1]):
        held(store, f"job{n}", minute)
    held(store, "other", 0, client="client-b")
    held(store, "hw2", 0, assignment="hw-2")
    first = queue.held("client-a", "hw-1", limit=3)
    assert ids(first) == ["job1", "job3", "job2"]  # the id breaks the tie of job1 and job3
    assert first[0].review is not None
    cursor = ReviewCursor(first[-1].review.to_dict()["held_at"], first[-1].id)  # type: ignore[union-attr]
    assert ids(queue.held("client-a", "hw-1", limit=3, after=cursor)) == ["job0"]
    assert ids(queue.held("client-a", None, limit=10)) == ["hw2", "job1", "job3", "job2", "job0"]
    assert ids(queue.held("client-b", None, limit=10)) == ["other"]


def test_a_review_moves_the_grade_out_of_the_queue_and_keeps_the_models(
    backend: tuple[JobStore, ReviewQueue],
) -> None:
    store, queue = backend
    held(store, "job0", 1)
    held(store, "job1", 2)
    at = T0 + timedelta(hours=1)
    teacher = GradeResult(6, 10, "better", grader="reviewer:key:ms")
    review = Review(1, "key:ms", at, ReviewDecision.OVERRIDE, "missed a point", teacher)
    store.update("job0", lambda j: j.record_review(review, at))
    assert ids(queue.held("client-a", "hw-1", limit=10)) == ["job1"]
    [reviewed] = queue.reviewed("client-a", "hw-1", limit=10)
    assert reviewed.result is not None and reviewed.result.score == 4
    assert reviewed.result.confidence == 0.4
    assert reviewed.review is not None and reviewed.review.reviews == (review,)
    assert reviewed.effective_result == teacher
    assert queue.reviewed("client-b", None, limit=10) == []


def test_a_review_whose_events_are_unpublished_is_found_until_marked(
    backend: tuple[JobStore, ReviewQueue],
) -> None:
    store, queue = backend
    held(store, "job0", 1)
    held(store, "job1", 2, client="client-b")
    assert queue.unannounced(10) == []  # a hold is announced by its job, not by a review
    at = T0 + timedelta(hours=1)
    review = Review(1, "key:ms", at, ReviewDecision.ACCEPT, "", GradeResult(4, 10, "ok"))
    store.update("job1", lambda j: j.record_review(review, at))
    assert [j.id for j in queue.unannounced(10)] == ["job1"]
    store.update(
        "job1",
        lambda j: dataclasses.replace(j, review=j.review.mark_announced()),  # type: ignore[union-attr]
    )
    assert queue.unannounced(10) == []
