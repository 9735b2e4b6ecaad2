"""CPU to check a zip whose entries are directories, at the upload size cap.

`python -m bench.archive_entries` builds a zip of 60,000 directory entries and one source
file (5 MB, under `GRADEQ_UPLOAD_MAX_FILE_BYTES`), the same with its end record claiming 3
entries, and prints the CPU time `read_archive` takes for each and what it decides.
"""

from __future__ import annotations

import io
import struct
import time
import zipfile

from shared.domain.file_content import read_archive
from shared.domain.uploads import UnsafeArchive, UploadLimits

DIRECTORIES = 59_999  # with the file, 60,000 entries: within what a zip holds without zip64


def directories_zip(count: int) -> bytes:
    """A zip of `count` directory entries and one source file."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for i in range(count):
            archive.writestr(f"{i}/", b"")
        archive.writestr("main.py", b"x = 1\n")
    return buffer.getvalue()


def claiming(data: bytes, count: int) -> bytes:
    """The archive with its end record claiming `count` entries."""
    at = data.rindex(b"PK\x05\x06")
    patched = bytearray(data)
    struct.pack_into("<HH", patched, at + 8, count, count)
    return bytes(patched)


def main() -> None:
    data = directories_zip(DIRECTORIES)
    for label, archive in (("as built", data), ("end record says 3", claiming(data, 3))):
        started = time.process_time()
        try:
            read_archive(archive, UploadLimits())
            decision = "accepted"
        except UnsafeArchive as exc:
            decision = f"refused: {exc.detail}"
        spent = time.process_time() - started
        print(f"{label}: {len(archive)} bytes, {spent:.4f} s CPU, {decision}")


if __name__ == "__main__":
    main()
