"""A job's uploaded files as the parts each provider's API defines.

Files are read once per attempt by `FileReader`: images and PDFs as bytes, or by
reference (`gs://`) where the provider reads Cloud Storage itself (Gemini on Vertex AI,
so nothing passes through the worker); text files and the source files of an archive as
text, within the upload limits; the text of all of a job's files together is bounded like
an answer (`PromptTooLarge` past it, before a text file is even read). A file that cannot
be read or sent is `FileUnusable`, a permanent failure naming the file.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from shared.domain.errors import DependencyUnavailable, PromptTooLarge
from shared.domain.file_content import read_archive
from shared.domain.uploads import FileKind, FileRef, FileUnusable, UnsafeArchive, UploadLimits
from shared.ports import BlobStore

#: Tokens a provider bills for one image (Gemini: 258 for an image up to 384 px a side,
#: tiles of 258 above; OpenAI's high detail is in the same range): used only to reserve
#: quota before a request.
IMAGE_TOKEN_ESTIMATE = 1_300
PDF_PAGE_TOKEN_ESTIMATE = 258
#: A rough number of PDF bytes per page, to reserve quota before knowing the page count.
PDF_BYTES_PER_PAGE = 50_000


@dataclass(frozen=True)
class Attachment:
    """One file as a grader sends it: text, bytes, or a reference the provider reads."""

    name: str
    mime_type: str
    kind: FileKind
    text: str = ""
    data: bytes = b""
    uri: str = ""

    @property
    def label(self) -> str:
        return f"{self.name} ({self.mime_type})"

    def estimated_tokens(self) -> int:
        if self.kind is FileKind.IMAGE:
            return IMAGE_TOKEN_ESTIMATE
        if self.kind is FileKind.PDF:
            pages = max(1, len(self.data) // PDF_BYTES_PER_PAGE)
            return pages * PDF_PAGE_TOKEN_ESTIMATE
        return len(self.text) // 4


class FileReader:
    """Reads a job's files from the blob store, bounded by the upload limits."""

    def __init__(self, blobs: BlobStore, limits: UploadLimits, *, by_reference: bool) -> None:
        self._blobs = blobs
        self._limits = limits
        # Images and PDFs as gs:// references (Gemini on Vertex AI) instead of bytes.
        self._by_reference = by_reference

    def read(self, files: tuple[FileRef, ...]) -> tuple[Attachment, ...]:
        """Every file as attachments (an archive gives one per source file)."""
        out: list[Attachment] = []
        text_bytes = 0
        for ref in files:
            if ref.kind is FileKind.TEXT:
                self._check_text(text_bytes + ref.size)  # known before the bytes are read
            read = self._read(ref)
            text_bytes += sum(len(a.text.encode()) for a in read)
            self._check_text(text_bytes)
            out.extend(read)
        return tuple(out)

    def _check_text(self, text_bytes: int) -> None:
        limit = self._limits.max_job_text_bytes
        if text_bytes > limit:
            raise PromptTooLarge(
                f"the job's files hold at least {text_bytes} bytes of text, at most {limit} "
                "are graded"
            )

    def _read(self, ref: FileRef) -> list[Attachment]:
        name = ref.name or ref.upload_id
        kind = ref.kind
        if kind in (FileKind.IMAGE, FileKind.PDF) and self._by_reference:
            uri = self._blobs.uri(ref.object)
            if uri:
                return [Attachment(name, ref.content_type, kind, uri=uri)]
        data = self._bytes(ref, name)
        if kind is FileKind.ARCHIVE:
            try:
                sources = read_archive(data, self._limits)
            except UnsafeArchive as exc:
                raise FileUnusable(f"{name}: {exc.detail}") from None
            return [
                Attachment(f"{name}/{s.path}", "text/plain", FileKind.TEXT, text=s.text)
                for s in sources
            ]
        if kind is FileKind.TEXT:
            try:
                return [Attachment(name, ref.content_type, kind, text=data.decode("utf-8"))]
            except UnicodeDecodeError:
                raise FileUnusable(f"{name} is not UTF-8 text") from None
        return [Attachment(name, ref.content_type, kind, data=data)]

    def _bytes(self, ref: FileRef, name: str) -> bytes:
        try:
            data = self._blobs.read(ref.object, min(ref.size, self._limits.max_file_bytes) + 1)
        except KeyError:
            raise FileUnusable(f"{name} is no longer stored (erased or expired)") from None
        except DependencyUnavailable:
            raise
        if len(data) != ref.size:
            raise FileUnusable(f"{name} holds {len(data)} bytes, {ref.size} were accepted")
        return data


def _file_heading(attachment: Attachment) -> str:
    return f"File {attachment.name}:\n"


# --- Gemini (google-genai) --------------------------------------------------------------

#: The Gemini API takes at most 20 MB per request; inline bytes travel base64-encoded
#: (4/3 larger), beside the prompt.
GEMINI_INLINE_LIMIT_BYTES = 14 * 1024 * 1024


def gemini_contents(user: str, attachments: tuple[Attachment, ...]) -> Any:
    """`contents` for generate_content: the prompt's text, then each file as a Part."""
    if not attachments:
        return user
    from google.genai import types

    inline = sum(len(a.data) for a in attachments if not a.uri)
    if inline > GEMINI_INLINE_LIMIT_BYTES:
        raise FileUnusable(
            f"the files add up to {inline} bytes, more than the Gemini API takes inline "
            f"({GEMINI_INLINE_LIMIT_BYTES}); lower GRADEQ_UPLOAD_MAX_JOB_BYTES or use Vertex AI"
        )
    parts = [types.Part.from_text(text=user)]
    for item in attachments:
        if item.kind is FileKind.TEXT:
            parts.append(types.Part.from_text(text=_file_heading(item) + item.text))
        elif item.uri:
            # Vertex AI reads the object itself: nothing passes through the worker.
            parts.append(types.Part.from_uri(file_uri=item.uri, mime_type=item.mime_type))
        else:
            parts.append(types.Part.from_bytes(data=item.data, mime_type=item.mime_type))
    return [types.Content(role="user", parts=parts)]


# --- OpenAI-compatible chat completions --------------------------------------------------


def openai_user_content(user: str, attachments: tuple[Attachment, ...]) -> Any:
    """The user message's content: the text alone, or content parts as the API defines."""
    if not attachments:
        return user
    parts: list[dict[str, Any]] = [{"type": "text", "text": user}]
    for item in attachments:
        if item.kind is FileKind.TEXT:
            parts.append({"type": "text", "text": _file_heading(item) + item.text})
            continue
        if not item.data:
            raise FileUnusable(f"{item.label} can only be sent as bytes to this provider")
        data_url = f"data:{item.mime_type};base64," + base64.b64encode(item.data).decode()
        if item.kind is FileKind.IMAGE:
            parts.append({"type": "image_url", "image_url": {"url": data_url}})
        elif item.kind is FileKind.PDF:
            parts.append({"type": "file", "file": {"filename": item.name, "file_data": data_url}})
        else:
            raise FileUnusable(f"{item.label} cannot be sent to this provider")
    return parts
