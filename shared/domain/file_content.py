"""What an uploaded file's bytes really are: magic-byte sniffing and safe archive reading.

The declared content type is only a claim: images and PDFs must start with their own
signature (sniffed by the `filetype` library), text must be UTF-8 without NUL bytes, and
a zip is read entry by entry within limits, never extracted to disk.
"""

from __future__ import annotations

import codecs
import io
import lzma
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


#: Bytes of central directory allowed per entry of the limit: the 46-byte record, a path
#: and its extra fields. A directory past it is refused before zipfile parses it.
DIRECTORY_BYTES_PER_ENTRY = 1024
#: The end of central directory record (as zipfile reads it) and the zip64 locator.
_END_RECORD = struct.Struct("<4s4H2LH")
_END_SIGNATURE = b"PK\x05\x06"
_ZIP64_LOCATOR = b"PK\x06\x07"
_MAX_COMMENT = 0xFFFF

#: What zipfile raises on a damaged or hostile archive (found by tests/unit/test_upload_fuzz.py).
_ZIP_ERRORS = (
    zipfile.BadZipFile,
    zlib.error,
    lzma.LZMAError,  # a damaged LZMA entry
    OSError,  # a damaged bzip2 entry: "Invalid data stream"
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


def _check_end_record(data: bytes, limits: UploadLimits) -> None:
    """Refuse, from the end record alone, a directory over the entry limit.

    zipfile parses the whole central directory when it opens an archive, however many
    entries it holds: its declared entry count and byte size are checked first, so the
    parse is bounded by the limit. zip64 is refused: an archive within the limits never
    needs it.
    """
    end = _end_record_offset(data)
    if end < 0:
        raise UnsafeArchive("the file is not a readable zip archive")
    _, _, _, _, entries, directory_bytes, _, _ = _END_RECORD.unpack_from(data, end)
    if end >= 20 and data[end - 20 : end - 16] == _ZIP64_LOCATOR:
        raise UnsafeArchive("zip64 archives are not accepted")
    _check_count(entries, limits)
    allowed = limits.max_archive_entries * DIRECTORY_BYTES_PER_ENTRY
    if directory_bytes > allowed:
        raise UnsafeArchive(
            f"the archive has a directory of {directory_bytes} bytes, at most {allowed} "
            f"for {limits.max_archive_entries} entries"
        )


def _end_record_offset(data: bytes) -> int:
    # Where zipfile finds it: the last 22 bytes when there is no comment, else the last
    # signature within a comment's reach of the end.
    size = _END_RECORD.size
    if len(data) >= size and data[-size : -size + 4] == _END_SIGNATURE and data[-2:] == b"\0\0":
        return len(data) - size
    at = data.rfind(_END_SIGNATURE, max(0, len(data) - _MAX_COMMENT - size))
    return at if 0 <= at <= len(data) - size else -1


def _check_count(entries: int, limits: UploadLimits) -> None:
    if entries > limits.max_archive_entries:
        raise UnsafeArchive(
            f"the archive has {entries} entries, at most {limits.max_archive_entries} are allowed"
        )


def _read_archive(data: bytes, limits: UploadLimits) -> list[SourceFile]:
    _check_end_record(data, limits)
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise UnsafeArchive("the file is not a readable zip archive") from None
    with archive:
        # Entries of every kind count: a directory entry costs a parse as a file does.
        _check_count(len(archive.infolist()), limits)
        entries = [i for i in archive.infolist() if not i.is_dir()]
        if not entries:
            raise UnsafeArchive("the archive holds no files")
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
