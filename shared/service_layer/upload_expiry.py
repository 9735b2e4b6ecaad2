"""Expiry of uploads no job names, on a blob store that keeps no lifecycle rule of its own.

Cloud Storage deletes uploads by the bucket's lifecycle rule. The embedded store has none:
this sweep, run on the worker's recovery tick, removes every upload stored longer ago than
the retention that no stored job of its school names. An upload a job names goes with that
job (its erasure); one that names no owner (stored before uploads did) cannot be asked
after and is kept.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from shared.ports import Clock, ExpiringBlobs, UploadReferences

log = logging.getLogger(__name__)


class UploadExpiry:
    """Removes uploads older than `max_age` that no job names, at most once per `every`."""

    def __init__(
        self,
        blobs: ExpiringBlobs,
        references: UploadReferences,
        clock: Clock,
        max_age: timedelta,
        every: timedelta = timedelta(hours=1),
    ) -> None:
        self._blobs = blobs
        self._references = references
        self._clock = clock
        self._max_age = max_age
        self._every = every
        self._next_at: datetime | None = None

    def sweep(self) -> list[str]:
        """Remove the expired uploads no job names, if a sweep is due; their names."""
        now = self._clock.now()
        if self._next_at is not None and now < self._next_at:
            return []
        self._next_at = now + self._every
        expired = [
            upload.name
            for upload in self._blobs.stored_before(now - self._max_age)
            if upload.owner is not None
            and not self._references.named_by_a_job(upload.owner.school, upload.name)
        ]
        if expired:
            self._blobs.delete(expired)
            log.info("expired uploads removed", extra={"uploads": len(expired)})
        return expired
