"""What an uploaded file's bytes really are: magic-byte sniffing and safe archive reading.

The declared content type is only a claim: images and PDFs must start with their own
signature (sniffed by the `filetype` library), text must be UTF-8 without NUL bytes, and
a zip is read entry by entry within limits, never extracted to disk.
"""

from __future__ import annotations

import codecs
import io
import posixpath
import struct
import zipfile
import zlib
from dataclasses import dataclass

import filetype

from shared.domain.uploads import (
    SOURCE_SUFFIXES,
    FileKind,
    UnsafeArchive,
    UploadLimits,
    UploadMismatch,
    kind_of,
)

#: Bytes read from the head of a file to sniff its type.
SNIFF_BYTES = 8192


def check_head(content_type: str, head: bytes, size: int) -> None:
    """Refuse a file whose first bytes are not of its declared type."""
    kind = kind_of(content_type)
    if kind is FileKind.TEXT:
        if b"\x00" in head or _sniffed(head) is not None:
            raise UploadMismatch(f"the file is not plain text ({_describe(head)})")
        # The head may end inside a character: only a complete file must end cleanly.
        decoder = codecs.getincrementaldecoder("utf-8")()
        try:
            decoder.decode(head, final=len(head) >= size)
        except UnicodeDecodeError:
            raise UploadMismatch("the file is not UTF-8 text") from None
        return
    sniffed = _sniffed(head)
    if sniffed != content_type:
        raise UploadMismatch(f"declared {content_type}, but the bytes are {_describe(head)}")
    if content_type == "image/png" and not _png_header_intact(head):
        # A PNG signature pasted on other bytes: the first chunk must be a sound IHDR.
        raise UploadMismatch("the file has a PNG signature but no valid PNG header chunk")
    if content_type == "image/webp" and int.from_bytes(head[4:8], "little") + 8 != size:
        raise UploadMismatch("the WebP file's length does not match its RIFF header")


def _png_header_intact(head: bytes) -> bool:
    # Signature (8), then length 13, "IHDR", 13 bytes of data, and the CRC of type + data.
    if len(head) < 33 or head[8:16] != b"\x00\x00\x00\rIHDR":
        return False
    return zlib.crc32(head[12:29]) == int.from_bytes(head[29:33], "big")


def _sniffed(head: bytes) -> str | None:
    guess = filetype.guess_mime(head)
    return str(guess) if guess else None


def _describe(head: bytes) -> str:
    return _sniffed(head) or "of an unknown type"


@dataclass(frozen=True)
class SourceFile:
    """One text entry of an archive."""

    path: str
    text: str


#: What zipfile raises on a damaged or hostile archive (found by tests/unit/test_upload_fuzz.py).
_ZIP_ERRORS = (
    zipfile.BadZipFile,
    zlib.error,
    NotImplementedError,  # a zip version or compression method zipfile does not read
    EOFError,
    ValueError,
    IndexError,
    KeyError,
    OverflowError,
    struct.error,
)


def read_archive(data: bytes, limits: UploadLimits) -> list[SourceFile]:
    """The archive's source files, checked against the limits before anything is expanded.

    Refused: more entries than allowed, a declared or actual expanded size over the
    limit (a zip bomb), absolute or `..` paths, links, encrypted entries, non-source
    entries, text that is not UTF-8, and archives zipfile cannot read.
    """
    try:
        return _read_archive(data, limits)
    except _ZIP_ERRORS as exc:
        raise UnsafeArchive(f"the archive cannot be read ({type(exc).__name__})") from None


def _read_archive(data: bytes, limits: UploadLimits) -> list[SourceFile]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise UnsafeArchive("the file is not a readable zip archive") from None
    with archive:
        entries = [i for i in archive.infolist() if not i.is_dir()]
        if not entries:
            raise UnsafeArchive("the archive holds no files")
        if len(entries) > limits.max_archive_entries:
            raise UnsafeArchive(
                f"the archive has {len(entries)} entries, at most "
                f"{limits.max_archive_entries} are allowed"
            )
        declared = sum(i.file_size for i in entries)
        if declared > limits.max_archive_expanded_bytes:
            raise UnsafeArchive(
                f"the archive expands to {declared} bytes, at most "
                f"{limits.max_archive_expanded_bytes} are allowed"
            )
        files = []
        budget = limits.max_archive_expanded_bytes
        for info in entries:
            path = _safe_path(info)
            # Read one byte past what the header declares: a lying header cannot
            # expand further than the budget.
            with archive.open(info) as entry:
                content = entry.read(min(info.file_size, budget) + 1)
            if len(content) > info.file_size or len(content) > budget:
                raise UnsafeArchive(f"{path} expands past its declared size")
            budget -= len(content)
            try:
                text = content.decode("utf-8")
            except UnicodeDecodeError:
                raise UnsafeArchive(f"{path} is not UTF-8 text") from None
            if "\x00" in text:
                raise UnsafeArchive(f"{path} is not text")
            files.append(SourceFile(path, text))
        return files


def _safe_path(info: zipfile.ZipInfo) -> str:
    name = info.filename.replace("\\", "/")
    normal = posixpath.normpath(name)
    if name.startswith("/") or normal.startswith("..") or ":" in name.split("/")[0]:
        raise UnsafeArchive(f"the entry {info.filename!r} points outside the archive")
    if info.flag_bits & 0x1:
        raise UnsafeArchive(f"the entry {info.filename!r} is encrypted")
    if (info.external_attr >> 16) & 0o170000 == 0o120000:
        raise UnsafeArchive(f"the entry {info.filename!r} is a link")
    suffix = posixpath.splitext(normal)[1].lower()
    if suffix not in SOURCE_SUFFIXES:
        raise UnsafeArchive(f"the entry {info.filename!r} is not a source or text file")
    return normal
