"""Uploads no job names expire on the embedded store as the bucket's lifecycle rule makes
them on Cloud Storage; an upload a job names stays with its job."""

from __future__ import annotations

import io
from datetime import timedelta
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest

from services.worker.app import create_app
from shared.adapters.embedded.blob_store import BLOB_ROUTE, FileBlobStore
from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.adapters.embedded.upload_references import SqliteUploadReferences
from shared.bootstrap import Adapters
from shared.bootstrap.embedded import EmbeddedFamily
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.authorization import Owner
from shared.domain.job import GradingRequest, Job
from shared.domain.uploads import FileRef, UploadLimits, UploadSignatureInvalid
from shared.service_layer.upload_expiry import UploadExpiry
from shared.service_layer.uploads import UploadService
from tests.contract.test_legacy_owner_contract import store_as_before
from tests.fakes import ScriptedGrader
from tests.support import files
from tests.unit.test_worker_api import AUTH

PNG = files.png()
DAY = timedelta(days=1)


class Uploads:
    def __init__(self, tmp_path: Path) -> None:
        self.clock = FrozenClock()
        self.blobs = FileBlobStore(tmp_path / "uploads", b"k" * 32, self.clock)
        db = SqliteDatabase(tmp_path / "jobs.sqlite3")
        self.jobs = SqliteJobStore(db)
        self.references = SqliteUploadReferences(db)
        self.service = UploadService(self.blobs, self.clock, UploadLimits(), self.references)
        self.expiry = UploadExpiry(
            self.blobs, self.references, self.clock, max_age=30 * DAY, every=timedelta(hours=1)
        )

    def upload(self, school: str, author: str = "server", student: str | None = None) -> str:
        """Make an upload and PUT its bytes; its object name."""
        new = self.service.create(school, "image/png", len(PNG), student, author)
        url = urlsplit(new.signed.url)
        name = url.path.removeprefix(BLOB_ROUTE)
        query = dict(parse_qsl(url.query))
        self.blobs.receive(name, query, "image/png", len(PNG), io.BytesIO(PNG))
        return name

    @staticmethod
    def job_naming(job_id: str, client_id: str, name: str) -> GradingRequest:
        ref = FileRef(name.rsplit("/", 1)[-1], "image/png", len(PNG), "p.png", name)
        return GradingRequest("s-" + job_id, "", "shows the working", 10.0, files=(ref,))


@pytest.fixture
def uploads(tmp_path: Path) -> Uploads:
    return Uploads(tmp_path)


def test_an_upload_names_its_school_and_author(uploads: Uploads) -> None:
    name = uploads.upload("school-a", "ada", student="ada")
    info = uploads.blobs.stat(name)
    assert info is not None and info.owner == Owner("school-a", "ada")
    server = uploads.blobs.stat(uploads.upload("school-a"))
    assert server is not None and server.owner == Owner("school-a", "server")


def test_the_owner_is_bound_by_the_signed_url(uploads: Uploads) -> None:
    new = uploads.service.create("school-a", "image/png", len(PNG), None, "ada")
    url = urlsplit(new.signed.url)
    query = dict(parse_qsl(url.query)) | {"author": "bo"}
    with pytest.raises(UploadSignatureInvalid):
        uploads.blobs.receive(
            url.path.removeprefix(BLOB_ROUTE), query, "image/png", len(PNG), io.BytesIO(PNG)
        )


def test_old_uploads_no_job_names_are_removed_and_the_rest_kept(uploads: Uploads) -> None:
    unnamed = uploads.upload("school-a")
    students = uploads.upload("school-a", "ada", student="ada")
    named = uploads.upload("school-a")
    named_before_authors = uploads.upload("school-a", "bo", student="bo")
    request = uploads.job_naming("job-1", "school-a", named)
    uploads.jobs.create(Job.new("job-1", "school-a", request, "fp", uploads.clock.now()))
    store_as_before(
        uploads.jobs,
        "old-1",
        "school-a:user:bo",
        uploads.job_naming("old-1", "school-a", named_before_authors),
    )
    uploads.clock.advance(29 * DAY)
    young = uploads.upload("school-a")
    assert uploads.expiry.sweep() == []  # nothing is 30 days old yet

    uploads.clock.advance(DAY + timedelta(minutes=1))
    assert uploads.expiry.sweep() == sorted([unnamed, students])
    for name in (unnamed, students):
        assert uploads.blobs.stat(name) is None
    for name in (named, named_before_authors, young):
        assert uploads.blobs.stat(name) is not None


def test_a_sweep_runs_at_most_once_per_interval(uploads: Uploads) -> None:
    first = uploads.upload("school-a")
    uploads.clock.advance(31 * DAY)
    second = uploads.upload("school-a")
    assert uploads.expiry.sweep() == [first]
    uploads.clock.advance(31 * DAY - timedelta(minutes=1))
    # the second is past its age only once the clock moves on
    uploads.clock.advance(timedelta(minutes=2))
    assert uploads.blobs.stat(second) is not None
    assert uploads.expiry.sweep() == [second]
    third = uploads.upload("school-a")
    uploads.clock.advance(31 * DAY)
    uploads.expiry = UploadExpiry(
        uploads.blobs, uploads.references, uploads.clock, max_age=30 * DAY, every=DAY * 60
    )
    assert uploads.expiry.sweep() == [third]
    fourth = uploads.upload("school-a")
    uploads.clock.advance(31 * DAY)
    assert uploads.expiry.sweep() == []  # the last sweep was 31 of its 60 days ago
    uploads.clock.advance(30 * DAY)
    assert uploads.expiry.sweep() == [fourth]


def test_the_worker_recovery_tick_expires_uploads_on_the_embedded_backend(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    """The embedded blob store under the data dir, swept by POST /tasks/recover."""
    blobs = EmbeddedFamily(settings).blob_store(clock)
    service = UploadService(blobs, clock, UploadLimits())
    new = service.create("client-a", "image/png", len(PNG))
    url = urlsplit(new.signed.url)
    name = url.path.removeprefix(BLOB_ROUTE)
    blobs.receive(name, dict(parse_qsl(url.query)), "image/png", len(PNG), io.BytesIO(PNG))
    client = create_app(settings, adapters, ScriptedGrader(), clock).test_client()
    clock.advance(timedelta(days=settings.uploads_retention_days) - timedelta(minutes=1))
    kept = client.post("/tasks/recover", headers=AUTH)
    assert kept.status_code == 200 and kept.json is not None
    assert kept.json["uploads_expired"] == [] and blobs.stat(name) is not None
    clock.advance(timedelta(hours=1, minutes=1))
    swept = client.post("/tasks/recover", headers=AUTH)
    assert swept.json is not None and swept.json["uploads_expired"] == [name]
    assert blobs.stat(name) is None
