"""A zip's entries of every kind count against its limit, read from its end record before
its directory is parsed."""

from __future__ import annotations

import io
import struct
import zipfile

import pytest

from shared.domain.file_content import read_archive
from shared.domain.uploads import UnsafeArchive, UploadLimits

LIMITS = UploadLimits(max_archive_entries=20)


def _zip(files: int, directories: int) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for i in range(directories):
            archive.writestr(f"d{i}/", b"")
        for i in range(files):
            archive.writestr(f"src/f{i}.py", b"x = 1\n")
    return buffer.getvalue()


def _with_end_record_count(data: bytes, count: int) -> bytes:
    """The archive with its end record claiming `count` entries (its directory unchanged)."""
    at = data.rindex(b"PK\x05\x06")
    patched = bytearray(data)
    struct.pack_into("<HH", patched, at + 8, count, count)
    return bytes(patched)


def test_directory_entries_count_against_the_limit() -> None:
    archive = _zip(files=3, directories=30)
    with pytest.raises(UnsafeArchive, match="33 entries"):
        read_archive(archive, LIMITS)


def test_an_archive_within_the_limit_is_read_without_its_directories() -> None:
    sources = read_archive(_zip(files=3, directories=17), LIMITS)
    assert [s.path for s in sources] == ["src/f0.py", "src/f1.py", "src/f2.py"]


def test_a_directory_too_large_for_the_limit_is_refused_before_it_is_parsed() -> None:
    # The end record claims 3 entries; the directory it points to holds 2,003.
    archive = _with_end_record_count(_zip(files=3, directories=2_000), 3)
    with pytest.raises(UnsafeArchive, match=r"directory of \d+ bytes"):
        read_archive(archive, LIMITS)


def test_an_end_record_naming_more_entries_than_allowed_is_refused() -> None:
    archive = _with_end_record_count(_zip(files=3, directories=0), 21)
    with pytest.raises(UnsafeArchive, match="21 entries"):
        read_archive(archive, LIMITS)


def test_a_directory_that_lies_about_its_count_is_counted_as_parsed() -> None:
    # Directory within its byte bound, end record claiming fewer entries than it holds.
    archive = _with_end_record_count(_zip(files=3, directories=20), 3)
    with pytest.raises(UnsafeArchive, match="23 entries"):
        read_archive(archive, LIMITS)
