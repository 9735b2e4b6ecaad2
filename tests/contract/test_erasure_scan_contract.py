"""An erased student leaves nothing, on each backend: after a student's work is erased (a
regraded submission, a reviewed one, an upload a job names, one no job ever named) and
their events are delivered again afterwards, a scan of every table (SQLite) or collection
(Firestore emulator), of the blob store (local disk, Cloud Storage emulator) and of the
analytics records finds neither the student's id nor any of their jobs', submissions',
uploads' ids nor their answers. Another student's work, scanned the same way, is found:
the scan can see what it looks for."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qsl, unquote, urlsplit

import pytest
import requests

from services.analytics.recorder import SUBSCRIBER as ANALYTICS
from services.analytics.recorder import record_event
from services.notification.notifier import SUBSCRIBER as NOTIFICATION
from shared.adapters.embedded.assignment_store import SqliteAssignmentStore, SqliteTally
from shared.adapters.embedded.blob_store import BLOB_ROUTE, FileBlobStore
from shared.adapters.embedded.erasure import SqliteJobEraser
from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.processed_events import SqliteProcessedEvents
from shared.adapters.embedded.review_store import SqliteReviewQueue
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.clock import FrozenClock
from shared.codecs.push_envelope import ReceivedEvent
from shared.domain.authorization import Principal, Role
from shared.domain.events import GradingCompleted
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest, Job
from shared.domain.review import Release, ReviewPolicy, hold_state
from shared.domain.uploads import FileRef, UploadLimits
from shared.ports import (
    AssignmentStore,
    BlobStore,
    EventRecords,
    JobEraser,
    JobStore,
    ProcessedEvents,
    ReviewQueue,
)
from shared.service_layer.completion import announce
from shared.service_layer.erasure import ErasureService
from shared.service_layer.review import Override, ReviewService
from shared.service_layer.uploads import UploadService
from tests.contract.test_assignment_store_contract import assignment
from tests.fakes import FakePublisher
from tests.support import gcs_emulator

LEASE = timedelta(seconds=30)
BUCKET = "uploads-scan"
CLIENT = "client-a"
ADA = "ada-7f3k"
BOB = "bob-2m9q"
LIMITS = UploadLimits(max_file_bytes=4096)


class RecordedEvents(ProcessedEvents, EventRecords, Protocol):
    """The processed events of a subscriber, whose records the test reads back."""


@dataclass
class Backend:
    jobs: JobStore
    assignments: AssignmentStore
    queue: ReviewQueue
    eraser: JobEraser
    processed: RecordedEvents
    blobs: BlobStore
    #: Sends the bytes to a signed upload URL, as a browser would.
    put: Callable[[str, dict[str, str], bytes], None]
    #: Every stored row or document and every stored object, as text.
    scan: Callable[[], list[str]]


def _sqlite_rows(db: SqliteDatabase) -> list[str]:
    conn = db.connection()
    tables = [
        r["name"] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    ]
    assert {"jobs", "processed_events", "assignment_tallies"} <= set(tables)
    found = []
    for table in tables:
        for row in conn.execute(f'SELECT * FROM "{table}"'):  # noqa: S608 (names from sqlite)
            found.append(f"{table}: " + " | ".join(str(v) for v in tuple(row)))
    return found


def _files(root: Path) -> list[str]:
    return [
        f"{p.relative_to(root)}: {p.read_bytes().decode(errors='replace')}"
        for p in root.rglob("*")
        if p.is_file()
    ]


def _embedded(tmp_path: Path, clock: FrozenClock) -> Backend:
    db = SqliteDatabase(tmp_path / "jobs.sqlite3")
    jobs = SqliteJobStore(db, on_write=SqliteTally(db).record)
    root = tmp_path / "uploads"
    blobs = FileBlobStore(root, b"k" * 32, clock)

    def put(url: str, headers: dict[str, str], data: bytes) -> None:
        parts = urlsplit(url)
        name = unquote(parts.path.removeprefix(BLOB_ROUTE))
        query = dict(parse_qsl(parts.query))
        blobs.receive(name, query, headers["Content-Type"], len(data), io.BytesIO(data))

    return Backend(
        jobs,
        SqliteAssignmentStore(db),
        SqliteReviewQueue(db),
        SqliteJobEraser(db),
        SqliteProcessedEvents(db),
        blobs,
        put,
        lambda: _sqlite_rows(db) + _files(root),
    )


def _documents(client: Any) -> list[str]:
    found = []

    def walk(collections: Any) -> None:
        for collection in collections:
            for ref in collection.list_documents():
                snapshot = ref.get()
                data = snapshot.to_dict() if snapshot.exists else {}
                found.append(f"{ref.path}: {json.dumps(data, default=str)}")
                walk(ref.collections())

    walk(client.collections())
    return found


def _google(request: pytest.FixtureRequest) -> Backend:
    import google.cloud.storage as storage
    from google.auth.credentials import AnonymousCredentials

    from shared.adapters.google.assignment_store import FirestoreAssignmentStore, FirestoreTally
    from shared.adapters.google.blob_store import GcsBlobStore
    from shared.adapters.google.erasure import FirestoreJobEraser
    from shared.adapters.google.job_store import FirestoreJobStore
    from shared.adapters.google.processed_events import FirestoreProcessedEvents
    from shared.adapters.google.review_store import FirestoreReviewQueue

    client: Any = request.getfixturevalue("firestore_clean")
    url = request.getfixturevalue("gcs_url")
    ttl = timedelta(days=30)
    tally = FirestoreTally(client, "assignment_tallies")
    storage_client = storage.Client(
        project=gcs_emulator.PROJECT,
        credentials=AnonymousCredentials(),  # type: ignore[no-untyped-call]
        client_options={"api_endpoint": url},
    )
    blobs = GcsBlobStore(
        storage_client,
        BUCKET,
        signing_credentials=gcs_emulator.signing_credentials(),
        api_access_endpoint=url,
    )

    def put(signed_url: str, headers: dict[str, str], data: bytes) -> None:
        sent = requests.put(signed_url, data=data, headers=headers, timeout=10)
        assert sent.status_code == 200, sent.text

    def objects() -> list[str]:
        return [
            f"{b.name}: {b.download_as_bytes().decode(errors='replace')}"
            for b in storage_client.list_blobs(BUCKET)
        ]

    return Backend(
        FirestoreJobStore(client, "grading_jobs", ttl, on_write=tally.record),
        FirestoreAssignmentStore(client),
        FirestoreReviewQueue(client, "grading_jobs"),
        FirestoreJobEraser(client, "grading_jobs", "assignment_tallies", "processed_events"),
        FirestoreProcessedEvents(client, "processed_events", ttl),
        blobs,
        put,
        lambda: _documents(client) + objects(),
    )


@pytest.fixture(scope="module")
def gcs_url() -> Iterator[str]:
    reason = gcs_emulator.missing_reason()
    if reason is not None:
        pytest.skip(f"Cloud Storage emulator unavailable: {reason}")
    with gcs_emulator.running_gcs_emulator(BUCKET) as url:
        yield url


@pytest.fixture
def clock() -> FrozenClock:
    # The signed upload URLs are checked against it: now, not a fixed date.
    return FrozenClock(datetime.now(UTC).replace(microsecond=0))


@pytest.fixture(params=["embedded", "google"])
def backend(request: pytest.FixtureRequest, tmp_path: Path, clock: FrozenClock) -> Backend:
    return _embedded(tmp_path, clock) if request.param == "embedded" else _google(request)


class School:
    """Drives one client's work through the services, as the intake and worker would."""

    def __init__(self, backend: Backend, clock: FrozenClock) -> None:
        self.backend = backend
        self.clock = clock
        self.publisher = FakePublisher()
        self.uploads = UploadService(backend.blobs, clock, LIMITS)
        self.delivered: list[GradingCompleted] = []

    def upload(self, student: str, text: str) -> FileRef:
        data = text.encode()
        made = self.uploads.create(CLIENT, "text/plain", len(data), student)
        self.backend.put(made.signed.url, made.signed.headers, data)
        return FileRef(made.upload_id, "text/plain", len(data), "answer.txt")

    def graded(self, n: int, student: str, files: tuple[FileRef, ...] = ()) -> Job:
        checked = self.uploads.verify(CLIENT, files, student) if files else ()
        request = GradingRequest(
            f"sub-{student}-{n}",
            f"the answer of {student} number {n}",
            "light",
            10.0,
            assignment_id="a-1",
            rubric_version=1,
            student_id=student,
            files=checked,
        )
        job_id = f"job-{student}-{n}"
        self.backend.jobs.create(Job.new(job_id, CLIENT, request, "fp", self.clock.now()))
        return self.finish(job_id, 4.0 + n)

    def finish(self, job_id: str, score: float, policy: ReviewPolicy | None = None) -> Job:
        now = self.clock.now()
        jobs = self.backend.jobs
        jobs.update(job_id, lambda j: j.claim("w", now, LEASE))
        result = GradeResult(score, 10, "ok", model="m", prompt_version="grading-v1")

        def succeed(job: Job) -> Job:
            done = job.succeed("w", result, now)
            held = hold_state(policy, job.id, job.generation, result, now) if policy else None
            return done.hold(held) if held is not None else done

        job = jobs.update(job_id, succeed)
        announce(job, jobs, self.publisher, self.clock)
        self.deliver()
        stored = jobs.get(job_id)
        assert stored is not None
        return stored

    def regrade(self, job: Job) -> Job:
        self.backend.jobs.update(job.id, lambda j: j.regrade(self.clock.now(), j.request))
        return self.finish(job.id, 8.0)

    def deliver(self) -> None:
        """Hand every event published since the last call to both subscribers."""
        for event in self.publisher.events:
            if isinstance(event, GradingCompleted) and event not in self.delivered:
                self.delivered.append(event)
                self.push(event)

    def push(self, event: GradingCompleted) -> bool:
        """Deliver one event to analytics and notification; whether either recorded it."""
        received = ReceivedEvent(event, "m", self.clock.now(), "sub", 1, {})
        recorded = record_event(self.backend.processed, received)
        # What the notifier keeps of an event without a callback URL.
        note: dict[str, object] = {"job_id": event.job_id, "outcome": event.outcome.value}
        if not self.backend.processed.contains(NOTIFICATION, event.event_id):
            recorded = self.backend.processed.add(NOTIFICATION, event.event_id, note) or recorded
        return recorded


def test_an_erased_student_leaves_nothing_in_any_store(
    backend: Backend, clock: FrozenClock
) -> None:
    school = School(backend, clock)
    backend.assignments.create(assignment())
    named = school.upload(ADA, "ada's photo of the working")
    never_named = school.upload(ADA, "ada's draft, never submitted")
    bobs_file = school.upload(BOB, "bob's photo")

    regraded = school.regrade(school.graded(1, ADA, (named,)))
    assert regraded.generation == 1
    policy = ReviewPolicy(pass_mark=5, margin=10, release=Release.AFTER_REVIEW)
    request = GradingRequest(
        "sub-ada-2", "the answer of ada number 2", "light", 10.0, student_id=ADA
    )
    backend.jobs.create(Job.new("job-ada-2", CLIENT, request, "fp", clock.now()))
    school.finish("job-ada-2", 5.0, policy)
    reviews = ReviewService(backend.jobs, backend.queue, school.publisher, clock)
    reviews.decide(
        Principal(CLIENT, "key:ms", Role.REVIEWER), "job-ada-2", "generous", Override(7.0)
    )
    school.deliver()
    bob = school.graded(1, BOB, (bobs_file,))

    ada_ids = [
        ADA,
        f"job-{ADA}-1",
        "job-ada-2",
        f"sub-{ADA}-1",
        "sub-ada-2",
        "the answer of ada",
        named.upload_id,
        never_named.upload_id,
        "ada's photo",
        "ada's draft",
    ]
    ada_events = [e for e in school.delivered if e.job_id.startswith("job-ada")]
    assert len({e.event_id for e in ada_events}) == 3  # two generations, one reviewed grade
    before = backend.scan()
    missing = [i for i in ada_ids if not any(i in line for line in before)]
    assert missing == [], "\n".join(before)  # all there to be found
    assert len([r for r in backend.processed.records(ANALYTICS) if "ada" in r["job_id"]]) == 3

    report = ErasureService(backend.jobs, backend.eraser, backend.blobs, clock).erase_student(
        CLIENT, ADA
    )
    assert sorted(report.jobs) == sorted([regraded.id, "job-ada-2"])
    assert len(report.uploads) == 2
    # Every event delivered again after the erasure: recorded nowhere.
    assert [school.push(e) for e in ada_events] == [False] * len(ada_events)

    after = backend.scan()
    leftovers = {i: [line for line in after if i in line] for i in ada_ids}
    assert leftovers == {i: [] for i in ada_ids}
    assert [r["job_id"] for r in backend.processed.records(ANALYTICS)] == [bob.id]
    assert [r["job_id"] for r in backend.processed.records(NOTIFICATION)] == [bob.id]
    # Another student's work is untouched, and the scan sees it.
    for other in (BOB, bob.id, bobs_file.upload_id, "bob's photo"):
        assert any(other in line for line in after), other
