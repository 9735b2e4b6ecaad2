"""The Cloud Storage operations one file-graded job costs, as docs/cost.md counts them:
one PUT (class A) by the browser, one metadata read and one ranged read (class B) at
submit, and one read per attempt by the worker or, on Vertex AI, by Gemini itself."""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime
from pathlib import Path

from shared.adapters.graders.parts import FileReader
from shared.clock import FrozenClock
from shared.domain.authorization import Owner
from shared.domain.uploads import FileRef, UploadLimits, object_name
from shared.ports import BlobInfo, SignedUpload
from shared.service_layer.uploads import UploadService
from tests.support import files
from tests.unit.test_grader_files import MemoryBlobs

COST_DOC = Path(__file__).resolve().parents[2] / "docs" / "cost.md"


class CountingBlobs(MemoryBlobs):
    """Counts each call the way Cloud Storage bills it."""

    def __init__(self, *, cloud: bool) -> None:
        super().__init__(cloud=cloud)
        self.calls: Counter[str] = Counter()

    def signed_put(
        self,
        name: str,
        content_type: str,
        size: int,
        expires_at: datetime,
        owner: Owner | None = None,
    ) -> SignedUpload:
        self.calls["sign (IAM signBlob, no storage operation)"] += 1
        return SignedUpload("", {}, expires_at)

    def stat(self, name: str) -> BlobInfo | None:
        self.calls["class B"] += 1
        return super().stat(name)

    def read(self, name: str, max_bytes: int) -> bytes:
        self.calls["class B"] += 1
        return super().read(name, max_bytes)


def _job_files(blobs: CountingBlobs, *, by_reference: bool) -> Counter[str]:
    service = UploadService(blobs, FrozenClock(), UploadLimits())
    upload = service.create("client-a", "image/png", len(files.png()))
    # The browser's PUT: one class A operation.
    blobs.objects[object_name("client-a", upload.upload_id)] = (files.png(), "image/png")
    blobs.calls["class A"] += 1
    ref = FileRef(upload.upload_id, "image/png", len(files.png()), "page.png")
    [checked] = service.verify("client-a", (ref,))
    FileReader(blobs, UploadLimits(), by_reference=by_reference).read((checked,))
    return blobs.calls


def test_a_file_graded_job_costs_one_class_a_and_three_class_b_operations() -> None:
    with_bytes = _job_files(CountingBlobs(cloud=False), by_reference=False)
    assert (with_bytes["class A"], with_bytes["class B"]) == (1, 3)
    by_reference = _job_files(CountingBlobs(cloud=True), by_reference=True)
    # The worker reads nothing; Gemini's own read of the gs:// object is the third.
    assert (by_reference["class A"], by_reference["class B"]) == (1, 2)


def test_the_cost_doc_counts_the_same_operations() -> None:
    text = COST_DOC.read_text()
    assert re.search(r"\| Cloud Storage operations \| 1 class A \+ 3 class B \|", text)
