"""Small real files for upload tests: a valid PNG, a PDF, zips benign and hostile."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib


def png(width: int = 2, height: int = 2) -> bytes:
    """A valid RGB PNG of one colour."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def pdf(padding: int = 0) -> bytes:
    """A tiny one-page PDF, padded with a comment to reach a size."""
    body = (
        b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n"
        b"2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj\n"
        b"3 0 obj<</Type/Page/Parent 2 0 R/MediaBox[0 0 200 200]>>endobj\n"
    )
    return body + b"%" + b"x" * padding + b"\ntrailer<</Root 1 0 R>>\n%%EOF\n"


#: The start of a Windows executable (MZ header and the DOS stub's text).
EXECUTABLE = (
    b"MZ\x90\x00\x03\x00\x00\x00\x04\x00\x00\x00\xff\xff"
    + b"\x00" * 48
    + (b"This program cannot be run in DOS mode.\r\r\n$" + b"\x00" * 200)
)


def zip_of(entries: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def zip_bomb(expanded: int) -> bytes:
    """One source entry of `expanded` zero bytes: a few KB that inflate past any limit."""
    return zip_of({"main.py": b"0" * expanded})
