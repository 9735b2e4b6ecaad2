"""The BlobStore port's contract, on local disk (embedded) and Cloud Storage (emulator).

A signed URL takes one PUT of the declared type and size to this client's object, and the
intake's check at submit accepts nothing else. Where the emulator cannot observe what
Cloud Storage enforces on a signed URL (it checks no signature), the test says so and
checks what the URL binds instead.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from flask import Flask
from werkzeug.serving import make_server

from services.intake.uploads import blobs as blob_routes
from shared.adapters.embedded.blob_store import FileBlobStore
from shared.clock import FrozenClock
from shared.domain.authorization import Owner
from shared.domain.uploads import (
    FileRef,
    UploadLimits,
    UploadMismatch,
    UploadNotFound,
    object_name,
    student_prefix,
)
from shared.http.problems import register_error_handlers
from shared.ports import BlobStore, SignedUpload
from shared.service_layer.uploads import UploadService
from tests.support import files, gcs_emulator

PNG = files.png(8, 8)
LIMITS = UploadLimits(max_file_bytes=4096)


@dataclass
class BlobHarness:
    """A blob store, the upload service on it, and whether the store checks signatures."""

    blobs: BlobStore
    service: UploadService
    clock: FrozenClock
    #: The store itself refuses a PUT that breaks its signed URL (the emulator does not).
    enforces_signed_urls: bool

    def put(self, signed: SignedUpload, body: bytes, **headers: str) -> int:
        sent = {**signed.headers, **headers}
        return requests.put(signed.url, data=body, headers=sent, timeout=10).status_code


def _serve_embedded(store: FileBlobStore, service: UploadService) -> Iterator[str]:
    app = Flask(__name__)
    app.extensions["gradeq.blob_receiver"] = store
    app.extensions["gradeq.uploads"] = service
    register_error_handlers(app)
    app.register_blueprint(blob_routes.bp)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(timeout=5)


@pytest.fixture(scope="module")
def gcs_url() -> Iterator[str]:
    reason = gcs_emulator.missing_reason()
    if reason is not None:
        pytest.skip(f"Cloud Storage emulator unavailable: {reason}")
    with gcs_emulator.running_gcs_emulator("uploads-test") as url:
        yield url


@pytest.fixture(params=["embedded", "google"])
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BlobHarness]:
    clock = FrozenClock(datetime.now(UTC).replace(microsecond=0))
    if request.param == "embedded":
        store = FileBlobStore(tmp_path / "uploads", b"k" * 32, clock)
        service = UploadService(store, clock, LIMITS)
        for base in _serve_embedded(store, service):
            store._base_url = base  # the intake makes the URL absolute; here the test does
            yield BlobHarness(store, service, clock, enforces_signed_urls=True)
        return
    import google.cloud.storage as storage
    from google.auth.credentials import AnonymousCredentials

    from shared.adapters.google.blob_store import GcsBlobStore

    url = request.getfixturevalue("gcs_url")
    client = storage.Client(
        project=gcs_emulator.PROJECT,
        credentials=AnonymousCredentials(),  # type: ignore[no-untyped-call]
        client_options={"api_endpoint": url},
    )
    gcs = GcsBlobStore(
        client,
        "uploads-test",
        signing_credentials=gcs_emulator.signing_credentials(),
        api_access_endpoint=url,
    )
    yield BlobHarness(gcs, UploadService(gcs, clock, LIMITS), clock, enforces_signed_urls=False)


def _ref(upload_id: str, size: int = len(PNG), content_type: str = "image/png") -> FileRef:
    return FileRef(upload_id, content_type, size, "page.png")


def test_a_signed_url_takes_the_declared_file(harness: BlobHarness) -> None:
    upload = harness.service.create("client-a", "image/png", len(PNG))
    assert harness.put(upload.signed, PNG) == 200
    [checked] = harness.service.verify("client-a", (_ref(upload.upload_id),))
    assert checked.object == object_name("client-a", upload.upload_id)
    assert harness.blobs.read(checked.object, 8) == PNG[:8]
    info = harness.blobs.stat(checked.object)
    assert info is not None and (info.size, info.content_type) == (len(PNG), "image/png")


def test_another_content_type_is_refused(harness: BlobHarness) -> None:
    upload = harness.service.create("client-a", "image/png", len(PNG))
    status = harness.put(upload.signed, PNG, **{"Content-Type": "application/pdf"})
    if harness.enforces_signed_urls:
        assert status in (400, 403, 422)
        assert harness.blobs.stat(object_name("client-a", upload.upload_id)) is None
    # Whatever the store kept, the job cannot take it.
    with pytest.raises((UploadMismatch, UploadNotFound)):
        harness.service.verify("client-a", (_ref(upload.upload_id),))


def test_another_size_is_refused(harness: BlobHarness) -> None:
    upload = harness.service.create("client-a", "image/png", len(PNG))
    longer = PNG + b"\x00" * 100
    status = harness.put(upload.signed, longer)
    if harness.enforces_signed_urls:
        assert status in (400, 403, 413, 422)
        assert harness.blobs.stat(object_name("client-a", upload.upload_id)) is None
    else:
        # Cloud Storage refuses a body outside x-goog-content-length-range; it is signed.
        assert upload.signed.headers["x-goog-content-length-range"] == f"{len(PNG)},{len(PNG)}"
        assert "x-goog-content-length-range" in _signed_headers(upload.signed)
    with pytest.raises((UploadMismatch, UploadNotFound)):
        harness.service.verify("client-a", (_ref(upload.upload_id),))


def test_an_expired_url_is_refused(harness: BlobHarness) -> None:
    upload = harness.service.create("client-a", "image/png", len(PNG))
    if not harness.enforces_signed_urls:
        # The emulator checks no expiry; Cloud Storage does, from the signed parameters.
        query = parse_qs(urlsplit(upload.signed.url).query)
        assert LIMITS.url_ttl_s - 60 < int(query["X-Goog-Expires"][0]) <= LIMITS.url_ttl_s
        assert query["X-Goog-Algorithm"] == ["GOOG4-RSA-SHA256"]
        assert {"content-type", "host"} <= set(_signed_headers(upload.signed))
        pytest.skip("the Cloud Storage emulator does not check signed URLs' expiry")
    harness.clock.advance(timedelta(seconds=LIMITS.url_ttl_s + 1))
    assert harness.put(upload.signed, PNG) == 403
    with pytest.raises(UploadNotFound):
        harness.service.verify("client-a", (_ref(upload.upload_id),))


def test_another_clients_upload_is_unknown(harness: BlobHarness) -> None:
    upload = harness.service.create("client-a", "image/png", len(PNG))
    assert harness.put(upload.signed, PNG) == 200
    with pytest.raises(UploadNotFound):
        harness.service.verify("client-b", (_ref(upload.upload_id),))
    # The owner still can.
    assert harness.service.verify("client-a", (_ref(upload.upload_id),))


def test_an_upload_is_written_once(harness: BlobHarness) -> None:
    upload = harness.service.create("client-a", "image/png", len(PNG))
    assert harness.put(upload.signed, PNG) == 200
    if not harness.enforces_signed_urls:
        # Cloud Storage refuses a second PUT: the URL only creates, and that is signed.
        assert upload.signed.headers["x-goog-if-generation-match"] == "0"
        assert "x-goog-if-generation-match" in _signed_headers(upload.signed)
        pytest.skip("the Cloud Storage emulator does not check preconditions on signed PUTs")
    swapped = files.png(8, 8)[:-12] + b"\x00" * 12  # same size and type, other bytes
    assert harness.put(upload.signed, swapped) == 409
    [checked] = harness.service.verify("client-a", (_ref(upload.upload_id),))
    assert harness.blobs.read(checked.object, len(PNG)) == PNG


def test_a_url_cannot_be_pointed_at_another_object(harness: BlobHarness) -> None:
    upload = harness.service.create("client-a", "image/png", len(PNG))
    if not harness.enforces_signed_urls:
        pytest.skip("the Cloud Storage emulator does not check signatures")
    moved = upload.signed.url.replace(upload.upload_id, "up_someone_elses")
    forged = SignedUpload(moved, upload.signed.headers, upload.signed.expires_at)
    assert harness.put(forged, PNG) == 403


def _signed_headers(signed: SignedUpload) -> list[str]:
    query = parse_qs(urlsplit(signed.url).query)
    return query["X-Goog-SignedHeaders"][0].split(";")


def test_a_students_uploads_live_under_their_prefix_and_go_together(
    harness: BlobHarness,
) -> None:
    made: dict[str | None, list[str]] = {}
    for student in ("ada", "ada", "bob", None):
        upload = harness.service.create("client-a", "image/png", len(PNG), student)
        assert harness.put(upload.signed, PNG) == 200
        made.setdefault(student, []).append(upload.upload_id)
    [first, _] = made["ada"]
    [checked] = harness.service.verify("client-a", (_ref(first),), "ada")
    assert checked.object == object_name("client-a", first, "ada")
    assert checked.object.startswith(student_prefix("client-a", "ada"))
    with pytest.raises(UploadNotFound):  # another student's submission cannot name it
        harness.service.verify("client-a", (_ref(first),), "bob")

    removed = harness.blobs.delete_under(student_prefix("client-a", "ada"))

    assert removed == sorted(object_name("client-a", u, "ada") for u in made["ada"])
    assert all(harness.blobs.stat(name) is None for name in removed)
    [bobs] = made["bob"]
    assert harness.blobs.stat(object_name("client-a", bobs, "bob")) is not None
    [nobodys] = made[None]
    assert harness.blobs.stat(object_name("client-a", nobodys)) is not None
    assert harness.blobs.delete_under(student_prefix("client-a", "ada")) == []
    assert harness.blobs.delete_under(student_prefix("client-b", "bob")) == []


def test_an_upload_names_its_school_and_author(harness: BlobHarness) -> None:
    upload = harness.service.create("client-a", "image/png", len(PNG), "ada", "ada")
    name = object_name("client-a", upload.upload_id, "ada")
    assert harness.put(upload.signed, PNG) == 200
    if not harness.enforces_signed_urls:
        # The PUT must carry the owner as the object's custom metadata, and it is signed;
        # the emulator keeps no x-goog-meta-* of an XML PUT, so the object is written as
        # Cloud Storage stores that PUT.
        owner_headers = {
            "x-goog-meta-gradeq-school": "client-a",
            "x-goog-meta-gradeq-author": "ada",
        }
        assert owner_headers.items() <= upload.signed.headers.items()
        assert set(owner_headers) <= set(_signed_headers(upload.signed))
        from shared.adapters.google.blob_store import GcsBlobStore

        assert isinstance(harness.blobs, GcsBlobStore)
        blob = harness.blobs._bucket.blob(name)
        blob.metadata = {"gradeq-school": "client-a", "gradeq-author": "ada"}
        blob.upload_from_string(PNG, content_type="image/png")
    info = harness.blobs.stat(name)
    assert info is not None and info.owner == Owner("client-a", "ada")
