"""What erasure's use case decides, pinned value by value."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from shared.adapters.embedded.erasure import SqliteJobEraser
from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.clock import FrozenClock
from shared.domain.authorization import SERVER, Principal, Role
from shared.domain.erasure import ErasureReport
from shared.domain.errors import JobNotFound
from shared.domain.grade import GradeResult
from shared.domain.ids import job_id_for
from shared.domain.job import GradingRequest, Job
from shared.domain.uploads import FileRef
from shared.service_layer.erasure import (
    ErasureConflict,
    ErasureService,
    Retention,
    bigquery_statement,
)
from tests.unit.test_grader_files import MemoryBlobs


@pytest.mark.parametrize(
    ("table", "job_ids"),
    [("proj.ds.events`; DROP", ["j1"]), ("proj.ds.events", ["j1", "x' OR '1'='1"])],
)
def test_a_statement_refuses_a_table_or_job_id_it_cannot_quote_safely(
    table: str, job_ids: list[str]
) -> None:
    with pytest.raises(ValueError) as refused:
        bigquery_statement(table, job_ids)
    assert str(refused.value) == "not a table name or not job ids"


TABLE = "proj.analytics.grading_completed_raw"
REQUEST = GradingRequest(submission_id="s", answer="a", rubric="r")
LOGS_WHAT = "job ids, status, scores and timings (never the answer, feedback, rubric or student id)"
WEBHOOKS = {
    "where": "webhooks",
    "what": "what the client's own endpoint received (scores, never the answer)",
    "until": "as the client keeps it",
}


class Erasure:
    """An erasure service on the embedded job store and eraser, a frozen clock."""

    def __init__(self, tmp_path: Path) -> None:
        self.clock = FrozenClock()
        db = SqliteDatabase(tmp_path / "jobs.sqlite3")
        self.store = SqliteJobStore(db)
        self.eraser = SqliteJobEraser(db)

    def service(self, retention: Retention | None = None) -> ErasureService:
        return ErasureService(self.store, self.eraser, None, self.clock, retention)

    def seed(self, key: str, graded: bool = False) -> str:
        job_id = job_id_for("client-a", key)
        self.store.create(Job.new(job_id, "client-a", REQUEST, "fp", self.clock.now()))
        if graded:
            lease = timedelta(seconds=30)
            self.store.update(job_id, lambda j: j.claim("w", self.clock.now(), lease))
            result = GradeResult(6, 10, "ok")
            self.store.update(job_id, lambda j: j.succeed("w", result, self.clock.now()))
        return job_id

    def logs(self, days: int) -> dict[str, str]:
        until = (self.clock.now() + timedelta(days=days)).isoformat()
        return {"where": "logs", "what": LOGS_WHAT, "until": until}


@pytest.fixture
def e(tmp_path: Path) -> Erasure:
    return Erasure(tmp_path)


def test_an_erased_job_is_reported_with_what_remains_where_and_until_when(e: Erasure) -> None:
    job_id = e.seed("k", graded=True)
    report = e.service(Retention(TABLE, log_retention_days=7)).erase_job("client-a", job_id)
    buffer_ends = (e.clock.now() + timedelta(minutes=90)).isoformat()
    assert report == ErasureReport(
        owner=Principal("client-a", SERVER, Role.SERVER).owner,
        jobs=[job_id],
        results=1,
        reviews=0,
        uploads=[],
        event_records=0,
        assignment_tallies=[],
        remains=[
            e.logs(7),
            WEBHOOKS,
            {
                "where": "bigquery",
                "what": "event rows (job and submission ids, scores; never the answer)",
                "until": "the statement is run; rows streamed in the last 90 minutes are in"
                " the streaming buffer, where DML cannot delete them: run it after " + buffer_ends,
                "statement": bigquery_statement(TABLE, [job_id]),
            },
        ],
    )
    assert e.store.get(job_id) is None


def test_a_job_not_yet_final_is_cancelled_then_erased_and_counts_no_result(e: Erasure) -> None:
    job_id = e.seed("k")
    report = e.service().erase_job("client-a", job_id)
    assert (report.jobs, report.results) == ([job_id], 0)
    # No analytics table: only the logs (30 days by default) and the webhooks remain.
    assert report.remains == [e.logs(30), WEBHOOKS]
    assert e.store.get(job_id) is None


def test_a_student_with_nothing_to_erase_gets_no_statement(e: Erasure) -> None:
    report = e.service(Retention(TABLE)).erase_student("client-a", "nobody")
    assert report.jobs == [] and report.remains == [e.logs(30), WEBHOOKS]


def test_an_unknown_job_is_not_found_by_its_id(e: Erasure) -> None:
    with pytest.raises(JobNotFound) as refused:
        e.service().erase_job("client-a", "nope")
    assert refused.value.detail == "no grading job nope"


def test_a_job_that_keeps_changing_is_tried_five_times_then_refused(
    e: Erasure, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = e.seed("k", graded=True)
    tries: list[str] = []

    def changed_meanwhile(job: Job) -> bool:
        tries.append(job.id)
        return False

    monkeypatch.setattr(e.eraser, "delete", changed_meanwhile)
    with pytest.raises(ErasureConflict) as refused:
        e.service().erase_job("client-a", job_id)
    assert refused.value.detail == f"grading job {job_id} kept changing; nothing more was erased"
    assert tries == [job_id] * 5 and e.store.get(job_id) is not None


#: A job's files: one stored in the blob store, one never stored (no object yet).
FILES = (
    FileRef("u1", "image/png", 12, "page.png", "uploads/client-a/u1"),
    FileRef("u2", "image/png", 12, "draft.png"),
)


def test_a_jobs_stored_files_are_reported_even_without_a_blob_store(e: Erasure) -> None:
    job_id = job_id_for("client-a", "k")
    request = GradingRequest(submission_id="s", answer="", rubric="r", files=FILES)
    e.store.create(Job.new(job_id, "client-a", request, "fp", e.clock.now()))
    report = e.service().erase_job("client-a", job_id)
    assert (report.jobs, report.uploads) == ([job_id], ["uploads/client-a/u1"])
    assert e.store.get(job_id) is None


class DeletingBlobs(MemoryBlobs):
    """Records each delete the erasure asks of the blob store."""

    def __init__(self) -> None:
        super().__init__(cloud=False)
        self.deleted: list[list[str]] = []

    def delete(self, names: list[str]) -> None:
        self.deleted.append(list(names))
        super().delete(names)

    def delete_under(self, prefix: str) -> list[str]:
        names = sorted(n for n in self.objects if n.startswith(prefix))
        self.delete(names)
        return names


def test_the_blob_store_is_asked_to_delete_a_jobs_stored_files_only(e: Erasure) -> None:
    blobs = DeletingBlobs()
    blobs.objects["uploads/client-a/u1"] = (b"png", "image/png")
    with_files = job_id_for("client-a", "files")
    request = GradingRequest(submission_id="s", answer="", rubric="r", files=FILES)
    e.store.create(Job.new(with_files, "client-a", request, "fp", e.clock.now()))
    without = e.seed("text")
    service = ErasureService(e.store, e.eraser, blobs, e.clock)
    assert service.erase_job("client-a", without).uploads == []
    assert blobs.deleted == []  # nothing to delete: no call
    assert service.erase_job("client-a", with_files).uploads == ["uploads/client-a/u1"]
    assert blobs.deleted == [["uploads/client-a/u1"]] and blobs.objects == {}
