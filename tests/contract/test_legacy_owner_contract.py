"""Jobs a signed-in user stored before jobs had an author (their client id the user's
scope `<school>:user:<uid>`, no `author`) are read as (school, author) on both stores,
without a migration; the next write stores them in the new form."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from shared.adapters.embedded.job_store import SqliteJobStore
from shared.domain.job import GradingRequest, Job
from shared.domain.status import JobStatus
from shared.ports import JobQuery, JobStore

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def store_as_before(
    store: JobStore, job_id: str, scope: str, request: GradingRequest | None = None
) -> None:
    """Write a job exactly as the stores did before authors: no `author` field."""
    request = request or GradingRequest(submission_id="s", answer="a", rubric="r")
    store.create(Job.new(job_id, scope, request, "fp", T0))
    if isinstance(store, SqliteJobStore):
        with store._db.transaction() as conn:
            conn.execute(
                "UPDATE jobs SET record = json_remove(record, '$.author') WHERE id = ?", (job_id,)
            )
        return
    from google.cloud import firestore

    store._jobs.document(job_id).update({"author": firestore.DELETE_FIELD})  # type: ignore[attr-defined]


def listed(store: JobStore, school: str, author: str | None = None) -> list[str]:
    return [j.id for j in store.list_jobs(JobQuery(school, 10, author=author))]


def test_a_users_job_from_before_is_read_as_its_school_and_author(job_store: JobStore) -> None:
    store_as_before(job_store, "old-1", "school-a:user:ada")
    job = job_store.get("old-1")
    assert job is not None
    assert (job.client_id, job.author) == ("school-a", "ada")
    assert job.to_record()["client_id"] == "school-a"


def test_the_next_write_stores_it_as_the_schools_and_lists_it_there(job_store: JobStore) -> None:
    store_as_before(job_store, "old-1", "school-a:user:ada")
    store_as_before(job_store, "old-2", "school-a-b:user:ada")  # another school, lookalike
    # Its author and its school list it from the first read on.
    assert listed(job_store, "school-a", "ada") == ["old-1"]
    assert listed(job_store, "school-a", "bo") == []
    pending = JobQuery("school-a", 10, JobStatus.PENDING, "s", author="ada")
    assert [j.id for j in job_store.list_jobs(pending)] == ["old-1"]
    assert listed(job_store, "school-a") == ["old-1"]
    job_store.update("old-1", lambda j: j.claim("w", T0, timedelta(seconds=30)))
    assert listed(job_store, "school-a") == ["old-1"]
    assert listed(job_store, "school-a", "ada") == ["old-1"]
    assert listed(job_store, "school-a", "bo") == []


def test_an_authors_pages_hold_the_old_and_the_new_form_alike(job_store: JobStore) -> None:
    store_as_before(job_store, "old-1", "school-a:user:ada")  # at T0
    for minute in (1, 2):
        request = GradingRequest(submission_id=f"s{minute}", answer="a", rubric="r")
        at = T0 + timedelta(minutes=minute)
        job_store.create(Job.new(f"new-{minute}", "school-a", request, "fp", at, author="ada"))
    first = job_store.list_jobs(JobQuery("school-a", 2, author="ada"))
    assert [j.id for j in first] == ["new-2", "new-1"]
    after = (first[-1].created_at, first[-1].id)
    rest = job_store.list_jobs(JobQuery("school-a", 2, after=after, author="ada"))
    assert [j.id for j in rest] == ["old-1"]


def test_the_schools_pages_hold_its_users_jobs_from_before(job_store: JobStore) -> None:
    """The school's full list (and its filtered lists) finds jobs stored in the old form
    before any write, in created order with the new ones, page after page."""
    store_as_before(job_store, "old-1", "school-a:user:ada")  # at T0
    store_as_before(job_store, "old-x", "school-a-b:user:ada")  # a lookalike school's
    for minute in (1, 2, 3):
        request = GradingRequest(submission_id=f"s{minute}", answer="a", rubric="r")
        at = T0 + timedelta(minutes=minute)
        author = "bo" if minute == 2 else "server"
        job_store.create(Job.new(f"new-{minute}", "school-a", request, "fp", at, author=author))
    store_as_before(job_store, "old-2", "school-a:user:cy")  # at T0 too: by id after it
    seen: list[str] = []
    after = None
    while True:
        page = job_store.list_jobs(JobQuery("school-a", 2, after=after))
        seen += [j.id for j in page]
        if len(page) < 2:
            break
        after = (page[-1].created_at, page[-1].id)
    assert seen == ["new-3", "new-2", "new-1", "old-2", "old-1"]
    pending = JobQuery("school-a", 10, JobStatus.PENDING)
    assert set(j.id for j in job_store.list_jobs(pending)) == set(seen)
    by_submission = JobQuery("school-a", 10, JobStatus.PENDING, submission_id="s")
    assert sorted(j.id for j in job_store.list_jobs(by_submission)) == ["old-1", "old-2"]
