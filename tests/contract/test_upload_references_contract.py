"""Files are owned by reference on every backend: an upload an accepted job names is never
deleted by a refused submission that names it again; one no job names is."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.adapters.embedded.upload_references import SqliteUploadReferences
from shared.clock import FrozenClock
from shared.domain.job import GradingRequest, Job
from shared.domain.uploads import FileRef, UploadLimits, UploadMismatch, object_name
from shared.ports import JobStore, UploadReferences
from shared.service_layer.uploads import UploadService
from tests.contract.test_job_store_contract import T0
from tests.contract.test_legacy_owner_contract import store_as_before
from tests.support import files
from tests.unit.test_grader_files import MemoryBlobs

PNG = files.png()


@dataclass
class Backend:
    jobs: JobStore
    references: UploadReferences


@pytest.fixture(params=["embedded", "google"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "embedded":
        db = SqliteDatabase(tmp_path / "jobs.sqlite3")
        return Backend(SqliteJobStore(db), SqliteUploadReferences(db))
    from shared.adapters.google.job_store import FirestoreJobStore
    from shared.adapters.google.upload_references import FirestoreUploadReferences

    client: Any = request.getfixturevalue("firestore_clean")
    return Backend(
        FirestoreJobStore(client, "grading_jobs", timedelta(days=30)),
        FirestoreUploadReferences(client, "grading_jobs"),
    )


def _accept(backend: Backend, job_id: str, client_id: str, *upload_ids: str) -> None:
    refs = tuple(
        FileRef(u, "image/png", len(PNG), "page.png", object_name(client_id, u)) for u in upload_ids
    )
    request = GradingRequest("s1", "", "shows the working", 10.0, files=refs)
    backend.jobs.create(Job.new(job_id, client_id, request, "fp", T0))


def test_a_job_names_its_uploads_and_no_others(backend: Backend) -> None:
    _accept(backend, "job-1", "client-a", "up_1", "up_2")
    _accept(backend, "job-2", "client-b", "up_3")
    named = backend.references.named_by_a_job
    assert named("client-a", object_name("client-a", "up_1"))
    assert named("client-a", object_name("client-a", "up_2"))
    assert named("client-b", object_name("client-b", "up_3"))
    assert not named("client-a", object_name("client-a", "up_3"))
    assert not named("client-b", object_name("client-b", "up_1"))


def _service(backend: Backend, blobs: MemoryBlobs) -> UploadService:
    return UploadService(blobs, FrozenClock(), UploadLimits(), references=backend.references)


def test_a_refused_resubmission_keeps_the_file_an_accepted_job_needs(backend: Backend) -> None:
    blobs = MemoryBlobs(cloud=False)
    name = object_name("client-a", "up_1")
    blobs.objects[name] = (PNG, "image/png")
    service = _service(backend, blobs)
    [checked] = service.verify("client-a", (FileRef("up_1", "image/png", len(PNG)),))
    _accept(backend, "job-1", "client-a", "up_1")
    with pytest.raises(UploadMismatch):
        service.verify("client-a", (FileRef("up_1", "image/png", len(PNG) + 1),))
    assert checked.object == name and name in blobs.objects


def test_a_refused_file_no_accepted_job_names_is_deleted(backend: Backend) -> None:
    blobs = MemoryBlobs(cloud=False)
    name = object_name("client-a", "up_1")
    blobs.objects[name] = (files.EXECUTABLE, "image/png")
    _accept(backend, "job-9", "client-b", "up_1")  # another client's upload of that id
    with pytest.raises(UploadMismatch):
        _service(backend, blobs).verify(
            "client-a", (FileRef("up_1", "image/png", len(files.EXECUTABLE)),)
        )
    assert name not in blobs.objects


def test_a_job_stored_before_authors_names_its_uploads_for_its_school(backend: Backend) -> None:
    """A job a signed-in user stored with their scope as client id (`<school>:user:<uid>`,
    no author) is its school's: its files are named by a job of that school."""
    name = object_name("school-a", "up_1")
    ref = FileRef("up_1", "image/png", len(PNG), "page.png", name)
    request = GradingRequest("s1", "", "shows the working", 10.0, files=(ref,))
    store_as_before(backend.jobs, "old-1", "school-a:user:ada", request)
    assert backend.references.named_by_a_job("school-a", name)
    assert not backend.references.named_by_a_job("school-a-b", name)
