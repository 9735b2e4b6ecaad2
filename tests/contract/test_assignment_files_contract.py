"""A class's answers that are files, on every backend: the batch stores each answer's files
with its job (the worker reads them from there, a regrade too), and they are owned by
reference like a single job's, so a refused resubmission never takes a file a batch's
job needs."""

from __future__ import annotations

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
from shared.adapters.embedded.upload_references import SqliteUploadReferences
from shared.clock import FrozenClock
from shared.domain.uploads import FileRef, UploadLimits, UploadMismatch, object_name
from shared.ports import UploadReferences
from shared.service_layer.assignments import Answer, AssignmentService, ItemStatus
from shared.service_layer.uploads import UploadService
from tests.contract.test_assignment_store_contract import Backend as AssignmentBackend
from tests.contract.test_job_store_contract import T0
from tests.fakes import FakeTaskQueue
from tests.support import files
from tests.unit.test_grader_files import MemoryBlobs

PNG = files.png()


@dataclass
class Backend:
    stores: AssignmentBackend
    references: UploadReferences


@pytest.fixture(params=["embedded", "google"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "embedded":
        db = SqliteDatabase(tmp_path / "jobs.sqlite3")
        jobs = SqliteJobStore(db, on_write=SqliteTally(db).record)
        stores = AssignmentBackend(jobs, SqliteAssignmentStore(db), SqliteJobBatch(db, jobs))
        return Backend(stores, SqliteUploadReferences(db))
    from shared.adapters.google.assignment_store import FirestoreAssignmentStore, FirestoreTally
    from shared.adapters.google.job_batch import FirestoreJobBatch
    from shared.adapters.google.job_store import FirestoreJobStore
    from shared.adapters.google.upload_references import FirestoreUploadReferences

    client: Any = request.getfixturevalue("firestore_clean")
    ttl = timedelta(days=30)
    tally = FirestoreTally(client, "assignment_tallies")
    store = FirestoreJobStore(client, "grading_jobs", ttl, on_write=tally.record)
    batch = FirestoreJobBatch(client, store, tally, "grading_jobs", "grading_jobs_counters", ttl)
    stores = AssignmentBackend(store, FirestoreAssignmentStore(client), batch)
    return Backend(stores, FirestoreUploadReferences(client, "grading_jobs"))


def test_a_batch_answers_files_are_stored_with_its_job_and_owned_by_reference(
    backend: Backend,
) -> None:
    clock = FrozenClock(T0)
    blobs = MemoryBlobs(cloud=False)
    name = object_name("client-a", "up_1", "ada")
    blobs.objects[name] = (PNG, "image/png")
    uploads = UploadService(blobs, clock, UploadLimits(), references=backend.references)
    stores = backend.stores
    service = AssignmentService(
        stores.assignments, stores.jobs, stores.batch, FakeTaskQueue(), clock
    )
    assignment, _ = service.create("client-a", "k", "Respiration", "names ATP", 10.0, "v1")
    sent = (FileRef("up_1", "image/png", len(PNG), "page-1.png"),)
    checked = uploads.verify("client-a", sent, "ada")
    answer = Answer("ada", "", student_id="ada", files=checked)
    [result] = service.submit_batch("client-a", assignment.id, [answer])
    assert result.status is ItemStatus.ACCEPTED and result.job is not None
    stored = stores.jobs.get(result.job.id)
    assert stored is not None and stored.request.files == checked
    assert checked[0].object == name
    assert backend.references.named_by_a_job("client-a", name)
    # Sent again: the same job; declared otherwise: refused, and the file stays.
    [again] = service.submit_batch("client-a", assignment.id, [answer])
    assert again.status is ItemStatus.EXISTING
    with pytest.raises(UploadMismatch):
        uploads.verify("client-a", (FileRef("up_1", "image/png", len(PNG) + 1),), "ada")
    assert name in blobs.objects
