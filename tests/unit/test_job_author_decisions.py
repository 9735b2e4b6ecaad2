"""A job read back from its stored record keeps its author, and posting a grade moves
the job's `updated_at` to the moment it was posted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.domain.authorization import SERVER, Owner
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest, Job

T0 = datetime(2026, 3, 1, 9, tzinfo=UTC)
REQUEST = GradingRequest("s", "an answer", "r", 10.0)


def test_a_students_own_job_keeps_its_author_through_its_record() -> None:
    job = Job.new("job-1", "school-a", REQUEST, "fp", T0, author="student-7")

    read = Job.from_record(job.to_record())

    assert read.author == "student-7"
    assert read.client_id == "school-a"
    assert read.owner == Owner("school-a", "student-7")
    assert read == job


def test_a_job_without_an_author_reads_back_as_the_schools_server() -> None:
    record = Job.new("job-1", "school-a", REQUEST, "fp", T0).to_record()
    del record["author"]  # stored before jobs had an author

    assert Job.from_record(record).owner == Owner("school-a", SERVER)


def test_the_store_gives_back_a_students_job_as_its_authors(tmp_path: Path) -> None:
    store = SqliteJobStore(SqliteDatabase(tmp_path / "jobs.sqlite3"))
    store.create(Job.new("job-1", "school-a", REQUEST, "fp", T0, author="student-7"))

    stored = store.get("job-1")

    assert stored is not None
    assert stored.owner == Owner("school-a", "student-7")


def test_posting_a_grade_moves_updated_at_to_the_post() -> None:
    request = GradingRequest(
        "s", "a", "r", 10.0, assignment_id="a-1", rubric_version=1, post_manually=True
    )
    graded = (
        Job.new("job-1", "c", request, "fp", T0)
        .claim("w", T0, timedelta(seconds=30))
        .succeed("w", GradeResult(7, 10, "ok"), T0)
    )
    later = T0 + timedelta(hours=3)

    posted = graded.post(later, "key:teacher")

    assert posted.posted is not None
    assert posted.posted.at == later
    assert posted.posted.by == "key:teacher"
    assert posted.updated_at == later
    assert not posted.post_announced
