"""The job store decodes a record only when it is not the text this process last saw; it
remembers the 2,048 jobs it last wrote or decoded."""

from __future__ import annotations

import dataclasses
import itertools
import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from shared.adapters.embedded import job_store
from shared.adapters.embedded.job_store import SqliteJobStore, _decode, _encode
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.clock import FrozenClock
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest, Job, JobError

REQUEST = GradingRequest(
    submission_id="s",
    answer="an answer",
    rubric=("c1", "c2"),
    max_score=9,
    assignment_id="hw-1",
    callback_url="https://example.com/hook",
    metadata={"course": {"id": 7, "tags": ["a", "b"]}},
)
LEASE = timedelta(seconds=30)
CLOCK = FrozenClock()


def _lives() -> Iterator[Job]:
    """A job through every kind of write the worker and the intake make."""
    now = CLOCK.now()
    job = Job.new("job-1", "client-a", REQUEST, "fp", now)
    yield job
    job = job.start_attempt("o1", now + timedelta(seconds=1), LEASE, 5)
    yield job
    job = job.renew("o1", now + timedelta(seconds=2), LEASE)
    yield job
    job = job.retry_later("o1", JobError("grading-transient", "busy"), now + timedelta(seconds=3))
    yield job
    job = job.start_attempt("o2", now + timedelta(seconds=4), LEASE, 5)
    yield job
    result = GradeResult(7.5, 9, "fine", ({"criterion": "c1", "met": True},), "rubric", "m", "v1")
    job = job.succeed("o2", result, now + timedelta(seconds=5))
    yield job
    yield job.mark_event_published(now + timedelta(seconds=6))


@pytest.mark.parametrize("job", list(_lives()), ids=lambda j: j.status.value)
def test_a_written_record_decodes_to_the_job_that_was_written(job: Job) -> None:
    # What makes remembering a written job as its record's decoding sound.
    assert _decode(_encode(job)) == job


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []

    def counted(text: str) -> Job:
        seen.append(text)
        return _decode(text)

    monkeypatch.setattr(job_store, "_decode", counted)
    return seen


def test_a_job_read_and_rewritten_by_this_process_is_not_decoded_again(
    tmp_path: Path, decodes: list[str]
) -> None:
    store = SqliteJobStore(SqliteDatabase(tmp_path / "j.db"))
    lives = list(_lives())
    store.create(lives[0])
    for before, after in itertools.pairwise(lives):

        def rewrite(j: Job, b: Job = before, a: Job = after) -> Job:
            return a if j == b else j

        assert store.update("job-1", rewrite) == after
    assert store.get("job-1") == lives[-1]
    assert decodes == []


def test_a_job_created_again_is_answered_from_what_this_process_wrote(
    tmp_path: Path, decodes: list[str]
) -> None:
    store = SqliteJobStore(SqliteDatabase(tmp_path / "j.db"))
    job = Job.new("job-1", "client-a", REQUEST, "fp", CLOCK.now())
    assert store.create(job) == (job, True)
    assert store.create(job) == (job, False)  # a retried request: the stored job
    assert decodes == []


def test_a_record_changed_by_another_process_is_decoded(tmp_path: Path, decodes: list[str]) -> None:
    path = tmp_path / "j.db"
    store = SqliteJobStore(SqliteDatabase(path))
    job = store.create(Job.new("job-1", "client-a", REQUEST, "fp", CLOCK.now()))[0]
    claimed = job.start_attempt("elsewhere", CLOCK.now(), LEASE, 5)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("UPDATE jobs SET record = ? WHERE id = ?", (_encode(claimed), job.id))
    other.close()
    assert store.get(job.id) == claimed
    assert len(decodes) == 1
    # Then remembered: the same text is not decoded twice.
    assert store.get(job.id) == claimed
    assert len(decodes) == 1


def test_the_latest_2048_jobs_are_remembered_and_the_oldest_let_go_first(
    decodes: list[str],
) -> None:
    first = Job.new("job-0", "client-a", REQUEST, "fp", CLOCK.now())
    jobs = [dataclasses.replace(first, id=f"job-{i}") for i in range(2049)]
    texts = [_encode(job) for job in jobs]
    recent = job_store._RecentJobs()
    for job, text in zip(jobs[:2048], texts[:2048], strict=True):
        recent.remember(job, text)
    assert recent.decode(jobs[0].id, texts[0]) is jobs[0]
    recent.remember(jobs[2048], texts[2048])  # one more: the oldest goes
    assert recent.decode(jobs[2048].id, texts[2048]) is jobs[2048]
    assert recent.decode(jobs[1].id, texts[1]) is jobs[1]
    assert decodes == []
    assert recent.decode(jobs[0].id, texts[0]) == jobs[0]
    assert decodes == [texts[0]]
