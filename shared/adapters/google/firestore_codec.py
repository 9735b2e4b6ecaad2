"""Map a `Job` to its Firestore document and back."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from google.cloud import firestore

from shared.domain.job import DATETIME_FIELDS, Job

#: Fields the store adds to the job record (never read back into the domain).
TTL_FIELD = "expire_at"
SERVER_CREATED_FIELD = "server_created_at"
SERVER_UPDATED_FIELD = "server_updated_at"
#: The object names of the job's files, for the query that tells whether a job needs one.
UPLOADS_FIELD = "upload_objects"


def to_document(job: Job, ttl: timedelta, *, created: bool) -> dict[str, Any]:
    """The document for `job`; the id is the document's name, not a field."""
    record = job.to_record()
    del record["id"]
    # Expiry counts from the job's creation so rewrites never postpone it.
    record[TTL_FIELD] = job.created_at + ttl
    # The commit time as Firestore saw it, for audits across instances; the domain's
    # own timestamps (one clock per decision) stay authoritative for leases and queries.
    record[SERVER_UPDATED_FIELD] = firestore.SERVER_TIMESTAMP
    if created:
        record[SERVER_CREATED_FIELD] = firestore.SERVER_TIMESTAMP
    objects = [f.object for f in job.request.files if f.object]
    if objects:  # what UploadReferences queries (array_contains); jobs without files skip it
        record[UPLOADS_FIELD] = objects
    return record


def plain(value: datetime) -> datetime:
    """A Firestore timestamp (DatetimeWithNanoseconds) as the plain datetime the domain uses."""
    return datetime(
        value.year,
        value.month,
        value.day,
        value.hour,
        value.minute,
        value.second,
        value.microsecond,
        tzinfo=value.tzinfo or UTC,
    )


def with_plain_datetimes(data: dict[str, Any], names: Iterable[str]) -> dict[str, Any]:
    """A copy of a document's data with its timestamp fields `names` made plain."""
    record = dict(data)
    for name in names:
        if record.get(name) is not None:
            record[name] = plain(record[name])
    return record


def from_document(job_id: str, data: dict[str, Any]) -> Job:
    """Rebuild the job from a document snapshot's data."""
    record = with_plain_datetimes(data, DATETIME_FIELDS)
    record["id"] = job_id
    return Job.from_record(record)
