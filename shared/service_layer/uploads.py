"""Uploads: hand out signed URLs, then check each file a job names before it is accepted."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from shared.domain.authorization import SERVER, Action, Owner, Principal
from shared.domain.file_content import SNIFF_BYTES, check_head, read_archive
from shared.domain.uploads import (
    FileKind,
    FileRef,
    UploadLimits,
    UploadMismatch,
    UploadNotFound,
    UploadQuotaExceeded,
    UploadRefused,
    UploadTooLarge,
    UploadTypeNotAllowed,
    kind_of,
    new_upload_id,
    object_name,
)
from shared.ports import BlobStore, Clock, SignedUpload, UploadQuota, UploadReferences

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NewUpload:
    """An upload id and where to PUT its bytes."""

    upload_id: str
    signed: SignedUpload


class UploadService:
    """Signed URLs bound to a declared type and size; checks of a job's files at submit."""

    def __init__(
        self,
        blobs: BlobStore,
        clock: Clock,
        limits: UploadLimits,
        references: UploadReferences | None = None,
        quota: UploadQuota | None = None,
    ) -> None:
        """`references`: which files accepted jobs name (None: no job names any);
        `quota`: each client's upload bytes per day (None: not counted)."""
        self._blobs = blobs
        self._clock = clock
        self.limits = limits
        self._references = references
        self._quota = quota

    def create(
        self,
        client_id: str,
        content_type: str,
        size: int,
        student_id: str | None = None,
        author: str = SERVER,
    ) -> NewUpload:
        """A new upload of `size` bytes of `content_type` for this client (and, with
        `student_id`, for that student: stored under the student's prefix). The object
        names its school and `author` (who made it) in its metadata.

        The size counts against the client's bytes of the UTC day when the URL is issued
        (the URL takes exactly that size), whether or not the file is then PUT.
        """
        _check_declared(content_type, size, self.limits)
        now = self._clock.now()
        self._count_bytes(client_id, size, now)
        upload_id = new_upload_id()
        expires_at = now + timedelta(seconds=self.limits.url_ttl_s)
        signed = self._blobs.signed_put(
            object_name(client_id, upload_id, student_id),
            content_type,
            size,
            expires_at,
            Owner(client_id, author),
        )
        return NewUpload(upload_id, signed)

    def _count_bytes(self, client_id: str, size: int, now: datetime) -> None:
        limit = self.limits.max_bytes_per_day
        if self._quota is None or self._quota.reserve(client_id, now.date(), size, limit):
            return
        midnight = datetime.combine(now.date() + timedelta(days=1), datetime.min.time(), now.tzinfo)
        raise UploadQuotaExceeded(
            f"{size} more bytes would pass this client's {limit} bytes of uploads a day (UTC)",
            retry_after_s=max(1, int((midnight - now).total_seconds())),
            limit=limit,
        )

    def verify(
        self,
        client_id: str,
        files: tuple[FileRef, ...],
        student_id: str | None = None,
        principal: Principal | None = None,
    ) -> tuple[FileRef, ...]:
        """The job's files, each checked: present, this client's, as declared, allowed.

        A job of `student_id` may name that student's uploads and uploads made for no
        student; a job of no student only the latter. With `principal`, the policy
        decides too (`upload.attach`): a student attaches their own uploads only, and
        one they may not attach is as unknown as a missing one.

        A refused file is deleted (a hostile upload is not kept) unless an accepted job
        names it: files are owned by reference, so a resubmission that declares one
        otherwise never takes it from the job that needs it. The job is refused with the
        first file's problem.
        """
        limits = self.limits
        if len(files) > limits.max_files_per_job:
            raise UploadTooLarge(
                f"a job may name at most {limits.max_files_per_job} files",
                limit=limits.max_files_per_job,
            )
        total = sum(f.size for f in files)
        if total > limits.max_job_bytes:
            raise UploadTooLarge(
                f"the job's files add up to {total} bytes, at most {limits.max_job_bytes}",
                limit=limits.max_job_bytes,
            )
        if len({f.upload_id for f in files}) != len(files):
            raise UploadMismatch("the same upload is named twice")
        # Text goes whole into the prompt: bounded like an answer, text files before any
        # read, archives by what they expand to. Sound files over it are not deleted.
        self._check_text(sum(f.size for f in files if kind_of(f.content_type) is FileKind.TEXT))
        checked = [self._verify_one(client_id, f, student_id, principal) for f in files]
        self._check_text(sum(text_bytes for _, text_bytes in checked))
        return tuple(ref for ref, _ in checked)

    def _check_text(self, text_bytes: int) -> None:
        limit = self.limits.max_job_text_bytes
        if text_bytes > limit:
            raise UploadTooLarge(
                f"the job's files hold {text_bytes} bytes of text, at most {limit} (as an answer)",
                limit=limit,
            )

    def _verify_one(
        self, client_id: str, ref: FileRef, student_id: str | None, principal: Principal | None
    ) -> tuple[FileRef, int]:
        """The checked reference and the bytes of text it holds."""
        _check_declared(ref.content_type, ref.size, self.limits)
        # The student's own upload first, then one made for no student (the school's).
        candidates = [(object_name(client_id, ref.upload_id), Owner(client_id, SERVER))]
        if student_id is not None:
            own = object_name(client_id, ref.upload_id, student_id)
            candidates.insert(0, (own, Owner(client_id, student_id)))
        missing = UploadNotFound(f"no upload {ref.upload_id} of this client (or not yet sent)")
        found = next(
            (
                (name, owner, info)
                for name, owner in candidates
                if (info := self._blobs.stat(name)) is not None
            ),
            None,
        )
        if found is None:
            raise missing
        name, owner, info = found
        if principal is not None and not principal.may(Action.UPLOAD_ATTACH, owner):
            raise missing  # not the caller's to attach: never read, never deleted
        try:
            if info.size != ref.size:
                raise UploadMismatch(
                    f"upload {ref.upload_id} holds {info.size} bytes, {ref.size} were declared"
                )
            if info.content_type != ref.content_type:
                raise UploadMismatch(
                    f"upload {ref.upload_id} was stored as {info.content_type}, "
                    f"{ref.content_type} was declared"
                )
            text_bytes = ref.size if ref.kind is FileKind.TEXT else 0
            if ref.kind is FileKind.ARCHIVE:
                sources = read_archive(self._blobs.read(name, ref.size), self.limits)
                text_bytes = sum(len(s.text.encode()) for s in sources)
            else:
                check_head(ref.content_type, self._blobs.read(name, SNIFF_BYTES), ref.size)
        except UploadRefused as exc:
            log.warning("upload refused", extra={"upload_id": ref.upload_id, "reason": exc.slug})
            if not self._named_by_a_job(client_id, name):
                self._blobs.delete([name])
            raise
        return FileRef(ref.upload_id, ref.content_type, ref.size, ref.name, name), text_bytes

    def _named_by_a_job(self, client_id: str, name: str) -> bool:
        return self._references is not None and self._references.named_by_a_job(client_id, name)

    def read(self, ref: FileRef) -> bytes | None:
        """A job's file as it was checked at submit (None: gone, erased or expired)."""
        if not ref.object:
            return None
        try:
            return self._blobs.read(ref.object, ref.size)
        except KeyError:
            return None

    def delete(self, files: tuple[FileRef, ...]) -> None:
        """Remove a job's files (erasure, expiry)."""
        self._blobs.delete([f.object for f in files if f.object])


def _check_declared(content_type: str, size: int, limits: UploadLimits) -> None:
    if kind_of(content_type) is None:
        raise UploadTypeNotAllowed(f"{content_type or 'no type'} cannot be graded")
    if size > limits.max_file_bytes:
        raise UploadTooLarge(
            f"{size} bytes is over the {limits.max_file_bytes}-byte limit per file",
            limit=limits.max_file_bytes,
        )
    if size < 1:
        raise UploadMismatch("an upload must hold at least one byte")
