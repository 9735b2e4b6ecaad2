"""Uploaded answer files: what a job may refer to, their limits, and why one is refused.

A client asks for an upload (declared content type and size), PUTs the bytes straight to
the blob store with a short-lived signed URL, then names the upload in a grading job. The
object's name derives from the client and the upload id, so one client can never name
another client's object.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar

from shared.domain.errors import GradeqError, PermanentGradingError


class FileKind(StrEnum):
    """How a grader reads a file."""

    IMAGE = "image"
    PDF = "pdf"
    TEXT = "text"
    ARCHIVE = "archive"  # a zip of source files, unpacked into text


#: The content types a client may declare, and how each is read.
ALLOWED_TYPES: dict[str, FileKind] = {
    "image/png": FileKind.IMAGE,
    "image/jpeg": FileKind.IMAGE,
    "image/webp": FileKind.IMAGE,
    "application/pdf": FileKind.PDF,
    "text/plain": FileKind.TEXT,
    "text/markdown": FileKind.TEXT,
    "text/x-python": FileKind.TEXT,
    "text/x-java-source": FileKind.TEXT,
    "text/x-c": FileKind.TEXT,
    "text/javascript": FileKind.TEXT,
    "text/csv": FileKind.TEXT,
    "application/zip": FileKind.ARCHIVE,
}

#: Entries of an archive read as source text; anything else in a zip refuses it.
SOURCE_SUFFIXES = frozenset(
    {
        ".txt", ".md", ".rst", ".py", ".java", ".c", ".h", ".cpp", ".hpp", ".cc", ".js",
        ".ts", ".go", ".rs", ".rb", ".kt", ".cs", ".sql", ".html", ".css", ".json",
        ".yaml", ".yml", ".toml", ".sh", ".r", ".m", ".scala", ".swift", ".csv", ".ipynb",
    }
)  # fmt: skip


def kind_of(content_type: str) -> FileKind | None:
    """The kind of an allowed content type, or None."""
    return ALLOWED_TYPES.get(content_type)


def new_upload_id() -> str:
    """A fresh, unguessable upload id."""
    return "up_" + secrets.token_urlsafe(18)


def _owner(client_id: str) -> str:
    return hashlib.sha256(client_id.encode()).hexdigest()[:32]


def object_name(client_id: str, upload_id: str, student_id: str | None = None) -> str:
    """Where the client's upload lives: under its student's prefix when it was made for
    one; digests keep client and student ids out of object names."""
    if student_id is None:
        return f"uploads/{_owner(client_id)}/{upload_id}"
    return student_prefix(client_id, student_id) + upload_id


def student_prefix(client_id: str, student_id: str) -> str:
    """Where every upload made for one student of the client lives (the student's erasure
    removes everything under it, named by a job or not)."""
    student = hashlib.sha256(f"{client_id}\0{student_id}".encode()).hexdigest()[:32]
    return f"uploads/{_owner(client_id)}/students/{student}/"


@dataclass(frozen=True)
class UploadLimits:
    """Per file, per job and per archive limits (settings)."""

    max_file_bytes: int = 10 * 1024 * 1024
    max_job_bytes: int = 25 * 1024 * 1024
    max_files_per_job: int = 10
    max_archive_entries: int = 200
    max_archive_expanded_bytes: int = 2 * 1024 * 1024
    #: Text a job's files may hold in all (text files, archives' entries): an answer's limit.
    max_job_text_bytes: int = 100 * 1024
    #: Bytes a client's uploads may hold per UTC day (counted when a URL is issued).
    max_bytes_per_day: int = 2 * 1024 * 1024 * 1024
    url_ttl_s: int = 600


@dataclass(frozen=True)
class FileRef:
    """One uploaded file a job refers to, as checked at submit."""

    upload_id: str
    content_type: str
    size: int
    name: str = ""
    #: The blob store's object name (derived from the client and the upload id).
    object: str = ""

    @property
    def kind(self) -> FileKind:
        kind = kind_of(self.content_type)
        if kind is None:
            raise ValueError(f"{self.content_type} is not an allowed type")
        return kind

    def to_dict(self) -> dict[str, Any]:
        return {
            "upload_id": self.upload_id,
            "content_type": self.content_type,
            "size": self.size,
            "name": self.name,
            "object": self.object,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FileRef:
        return cls(
            upload_id=data["upload_id"],
            content_type=data["content_type"],
            size=int(data["size"]),
            name=data.get("name") or "",
            object=data.get("object") or "",
        )


# --- why an upload is refused: each a 4xx with a stable type --------------------------


class UploadRefused(GradeqError):
    """An upload, or a job's files, cannot be accepted."""

    slug: ClassVar[str] = "upload-refused"
    title: ClassVar[str] = "The uploaded file cannot be accepted"
    status: ClassVar[int] = 422


class UploadTypeNotAllowed(UploadRefused):
    slug = "upload-type-not-allowed"
    title = "The file's type is not one that can be graded"
    status = 415


class UploadTooLarge(UploadRefused):
    slug = "upload-too-large"
    title = "The file or the job's files are over the size limit"
    status = 413


class UploadQuotaExceeded(UploadRefused):
    """The client's upload bytes of the day would pass its quota (`limit`; Retry-After)."""

    slug = "upload-quota-exceeded"
    title = "The client's uploads of the day are over their quota"
    status = 429

    def __init__(self, detail: str, retry_after_s: int, limit: int) -> None:
        super().__init__(detail, limit=limit)
        self.retry_after_s = retry_after_s


class UploadNotFound(UploadRefused):
    slug = "upload-not-found"
    title = "No such upload for this client"
    status = 422


class UploadMismatch(UploadRefused):
    """The stored object differs from what was declared (size, type, or its bytes)."""

    slug = "upload-mismatch"
    title = "The uploaded file does not match what was declared"
    status = 422


class UnsafeArchive(UploadRefused):
    """A zip over its entry or expanded-size limits, with unsafe paths, or not source."""

    slug = "upload-archive-refused"
    title = "The archive cannot be accepted"
    status = 422


class UploadAlreadySent(UploadRefused):
    """A second PUT to an upload: objects are written once, so what was checked stays."""

    slug = "upload-already-sent"
    title = "This upload has already been sent"
    status = 409


class UploadSignatureInvalid(GradeqError):
    """A PUT to the embedded blob store whose signature, expiry or limits do not hold."""

    slug = "upload-signature-invalid"
    title = "The upload URL is invalid, expired, or not for this request"
    status = 403


class FileUnusable(PermanentGradingError):
    """A job's file the grader cannot read or send to its model: no retry can help."""

    slug = "grading-file-unusable"
    title = "A file of the answer cannot be used by the grader"
