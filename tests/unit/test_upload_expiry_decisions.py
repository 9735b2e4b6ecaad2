"""The upload expiry's timing, pinned: a sweep is due again exactly one interval after the
last one."""

from __future__ import annotations

from datetime import timedelta

from shared.service_layer.upload_expiry import UploadExpiry
from tests.unit.test_upload_expiry import Uploads, uploads  # noqa: F401

HOUR = timedelta(hours=1)


def test_a_sweep_is_due_again_exactly_one_interval_later(uploads: Uploads) -> None:  # noqa: F811
    expiry = UploadExpiry(
        uploads.blobs, uploads.references, uploads.clock, max_age=HOUR / 2, every=HOUR
    )
    first = uploads.upload("school-a")
    uploads.clock.advance(HOUR)
    second = uploads.upload("school-a")
    assert expiry.sweep() == [first]
    uploads.clock.advance(HOUR - timedelta(microseconds=1))
    assert expiry.sweep() == []  # not yet due, though the second is past its age
    uploads.clock.advance(timedelta(microseconds=1))
    assert expiry.sweep() == [second]
