"""What an upload's bytes are taken for: each decision of `shared.domain.file_content`.

Sniffing a declared type, reading an archive's end record as zipfile does, the limits on
entries, directory bytes and expanded size (each at the limit and one past), and every
entry path, flag and mode that refuses an archive. Refusals are compared by their whole
detail, which is what the client reads.
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib

import pytest

from shared.domain.file_content import SourceFile, check_head, read_archive
from shared.domain.uploads import UnsafeArchive, UploadLimits, UploadMismatch

END = b"PK\x05\x06"


def png_head(ihdr_type: bytes = b"IHDR", crc_fix: int = 0) -> bytes:
    data = struct.pack(">IIBBBBB", 1, 1, 8, 6, 0, 0, 0)
    crc = zlib.crc32(ihdr_type + data) ^ crc_fix
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + ihdr_type + data + struct.pack(">I", crc)


def webp_head(riff_length: int) -> bytes:
    return b"RIFF" + riff_length.to_bytes(4, "little") + b"WEBPVP8 " + b"\0" * 20


def zip_of(entries: dict[str, bytes | str], comment: bytes = b"", **info_fields: int) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in entries.items():
            info = zipfile.ZipInfo(name)
            archive.writestr(info, content)
            for field, value in info_fields.items():
                setattr(info, field, value)
        archive.comment = comment
    return buffer.getvalue()


def refusal(data: bytes, limits: UploadLimits | None = None) -> str:
    with pytest.raises(UnsafeArchive) as raised:
        read_archive(data, limits or UploadLimits())
    return raised.value.detail


def mismatch(content_type: str, head: bytes, size: int) -> str:
    with pytest.raises(UploadMismatch) as raised:
        check_head(content_type, head, size)
    return raised.value.detail


# --- check_head ----------------------------------------------------------------------


def test_text_with_a_nul_byte_is_not_plain_text() -> None:
    assert (
        mismatch("text/plain", b"ab\x00cd", 5) == "the file is not plain text (of an unknown type)"
    )


def test_text_whose_bytes_sniff_as_another_type_is_refused_naming_it() -> None:
    head = png_head()
    assert mismatch("text/plain", head, len(head)) == "the file is not plain text (image/png)"


def test_plain_utf8_text_passes() -> None:
    check_head("text/x-python", "print('é')\n".encode(), 13)


def test_a_complete_file_ending_inside_a_character_is_not_utf8() -> None:
    assert mismatch("text/plain", b"ab\xc3", 3) == "the file is not UTF-8 text"


def test_a_head_cut_inside_a_character_passes_when_more_follows() -> None:
    check_head("text/plain", b"ab\xc3", 4)


def test_invalid_utf8_in_the_head_is_refused_even_when_more_follows() -> None:
    assert mismatch("text/plain", b"ab\xff", 10) == "the file is not UTF-8 text"


def test_a_sound_png_passes_and_its_head_may_be_exactly_the_header() -> None:
    head = png_head()
    assert len(head) == 33
    check_head("image/png", head, 1000)


def test_a_png_signature_without_its_header_chunk_is_refused() -> None:
    expected = "the file has a PNG signature but no valid PNG header chunk"
    assert mismatch("image/png", png_head(crc_fix=1), 1000) == expected
    assert mismatch("image/png", png_head(b"IHDX"), 1000) == expected
    assert mismatch("image/png", png_head()[:32], 32) == expected


def test_a_declared_type_must_be_what_the_bytes_are() -> None:
    assert (
        mismatch("image/jpeg", png_head(), 1000)
        == "declared image/jpeg, but the bytes are image/png"
    )
    assert mismatch("application/pdf", b"hello", 5) == (
        "declared application/pdf, but the bytes are of an unknown type"
    )


def test_a_jpeg_is_not_held_to_the_png_header() -> None:
    check_head("image/jpeg", b"\xff\xd8\xff\xe0" + b"\0" * 40, 1000)


def test_a_webp_must_be_as_long_as_its_riff_header_says() -> None:
    check_head("image/webp", webp_head(292), 300)
    expected = "the WebP file's length does not match its RIFF header"
    assert mismatch("image/webp", webp_head(292), 301) == expected
    assert mismatch("image/webp", webp_head(292), 299) == expected


# --- the end record ------------------------------------------------------------------


def test_bytes_without_an_end_record_are_not_a_zip() -> None:
    assert refusal(b"hello") == "the file is not a readable zip archive"
    assert refusal(b"x" * 30) == "the file is not a readable zip archive"


def test_an_end_record_at_the_very_start_is_read() -> None:
    assert refusal(zip_of({})) == "the archive holds no files"
    assert refusal(zip_of({}, comment=b"hi")) == "the archive holds no files"


def test_the_end_record_is_found_behind_a_comment() -> None:
    data = zip_of({"a.py": "x"}, comment=b"\xff" * 30)
    assert read_archive(data, UploadLimits()) == [SourceFile("a.py", "x")]


def test_the_end_record_is_found_behind_the_longest_comment() -> None:
    data = zip_of({"a.py": "x"}, comment=b"c" * 0xFFFF)
    assert read_archive(data, UploadLimits()) == [SourceFile("a.py", "x")]


def test_a_last_record_that_claims_a_missing_comment_is_still_read() -> None:
    data = zip_of({"a.py": "x"})
    assert read_archive(data[:-2] + b"\x05\x00", UploadLimits()) == [SourceFile("a.py", "x")]


def test_a_signature_too_close_to_the_end_is_no_end_record() -> None:
    assert refusal(zip_of({"a.py": "x"}) + END) == "the file is not a readable zip archive"


def test_a_comment_less_record_is_read_in_place_even_if_a_signature_follows_it() -> None:
    # 22 bytes whose central directory offset reads "PK\5\6": the record is the last 22.
    data = END + struct.pack("<4HL", 0, 0, 5, 5, 0) + END + b"\0\0"
    limits = UploadLimits(max_archive_entries=1)
    assert refusal(data, limits) == "the archive has 5 entries, at most 1 are allowed"


def test_zip64_is_refused() -> None:
    data = zip_of({"a.py": "x"})
    locator = b"PK\x06\x07" + b"\0" * 16
    assert refusal(data[:-22] + locator + data[-22:]) == "zip64 archives are not accepted"


def test_a_zip64_locator_at_the_very_start_is_refused() -> None:
    data = b"PK\x06\x07" + b"\0" * 16 + END + b"\0" * 18
    assert refusal(data) == "zip64 archives are not accepted"


def test_a_directory_zipfile_cannot_parse_is_not_a_readable_zip() -> None:
    data = b"X" * 46 + END + struct.pack("<4H2LH", 0, 0, 1, 1, 46, 0, 0)
    assert refusal(data) == "the file is not a readable zip archive"


# --- entry count and directory bytes ---------------------------------------------------


def test_the_declared_entry_count_may_reach_the_limit_but_not_pass_it() -> None:
    data = zip_of({"a.py": "1", "b.py": "2"})
    assert len(read_archive(data, UploadLimits(max_archive_entries=2))) == 2
    limits = UploadLimits(max_archive_entries=1)
    assert refusal(data, limits) == "the archive has 2 entries, at most 1 are allowed"


def test_the_entries_zipfile_finds_count_not_only_the_declared_number() -> None:
    data = bytearray(zip_of({"a.py": "1", "b.py": "2", "c.py": "3"}))
    struct.pack_into("<HH", data, len(data) - 14, 1, 1)  # the end record claims one entry
    limits = UploadLimits(max_archive_entries=2)
    assert refusal(bytes(data), limits) == "the archive has 3 entries, at most 2 are allowed"


def test_directory_entries_count_against_the_limit_but_are_not_files() -> None:
    data = zip_of({"src/": b"", "src/a.py": "x"})
    assert read_archive(data, UploadLimits(max_archive_entries=2)) == [SourceFile("src/a.py", "x")]
    limits = UploadLimits(max_archive_entries=1)
    assert refusal(data, limits) == "the archive has 2 entries, at most 1 are allowed"


def test_the_central_directory_may_reach_its_byte_limit_but_not_pass_it() -> None:
    limits = UploadLimits(max_archive_entries=1)  # 1024 bytes of directory
    at_limit = "a" * (1024 - 46 - 3) + ".py"
    assert read_archive(zip_of({at_limit: "x"}), limits) == [SourceFile(at_limit, "x")]
    assert refusal(zip_of({"b" + at_limit: "x"}), limits) == (
        "the archive has a directory of 1025 bytes, at most 1024 for 1 entries"
    )


# --- expanded size -------------------------------------------------------------------


def test_the_declared_expanded_size_may_reach_the_limit_but_not_pass_it() -> None:
    limits = UploadLimits(max_archive_expanded_bytes=30)
    files = read_archive(zip_of({"a.py": "a" * 10, "b.py": "b" * 20}), limits)
    assert files == [SourceFile("a.py", "a" * 10), SourceFile("b.py", "b" * 20)]
    assert refusal(zip_of({"a.py": "a" * 10, "b.py": "b" * 21}), limits) == (
        "the archive expands to 31 bytes, at most 30 are allowed"
    )


def test_the_budget_left_after_one_entry_still_holds_a_larger_one() -> None:
    limits = UploadLimits(max_archive_expanded_bytes=100)
    files = read_archive(zip_of({"a.py": "a" * 5, "b.py": "b" * 50}), limits)
    assert files == [SourceFile("a.py", "a" * 5), SourceFile("b.py", "b" * 50)]


def test_damaged_entry_data_cannot_be_read() -> None:
    data = zip_of({"a.py": "hello"})
    damaged = data.replace(b"hello", b"jello", 1)
    assert refusal(damaged) == "the archive cannot be read (BadZipFile)"


def test_entries_must_be_utf8_text() -> None:
    assert refusal(zip_of({"a.py": b"caf\xe9"})) == "a.py is not UTF-8 text"
    assert refusal(zip_of({"a.py": b"a\x00b"})) == "a.py is not text"


# --- entry paths, flags and modes ------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["/etc/x.py", "../x.py", "a/../../x.py", "..\\x.py", "C:\\x.py", "C:/x.py", "c:x.py"],
)
def test_an_entry_outside_the_archive_is_refused(name: str) -> None:
    assert refusal(zip_of({name: "x"})) == f"the entry {name!r} points outside the archive"


def test_a_colon_past_the_first_segment_is_only_a_name() -> None:
    assert read_archive(zip_of({"src/a:b.py": "x"}), UploadLimits()) == [
        SourceFile("src/a:b.py", "x")
    ]


def test_entry_paths_are_normalised_with_forward_slashes() -> None:
    files = read_archive(zip_of({"src\\a.py": "1", "src/./b.py": "2"}), UploadLimits())
    assert files == [SourceFile("src/a.py", "1"), SourceFile("src/b.py", "2")]


def test_an_encrypted_entry_is_refused() -> None:
    data = zip_of({"a.py": "x"}, flag_bits=0x1)
    assert refusal(data) == "the entry 'a.py' is encrypted"


def test_other_flags_do_not_refuse_an_entry() -> None:
    data = zip_of({"a.py": "x"}, flag_bits=0x800)
    assert read_archive(data, UploadLimits()) == [SourceFile("a.py", "x")]


def test_a_symlink_entry_is_refused() -> None:
    data = zip_of({"a.py": "x"}, external_attr=0o120777 << 16)
    assert refusal(data) == "the entry 'a.py' is a link"


def test_a_regular_file_mode_is_read() -> None:
    data = zip_of({"a.py": "x"}, external_attr=0o100644 << 16)
    assert read_archive(data, UploadLimits()) == [SourceFile("a.py", "x")]


def test_a_non_source_entry_is_refused_and_suffixes_ignore_case() -> None:
    assert refusal(zip_of({"a.exe": "x"})) == "the entry 'a.exe' is not a source or text file"
    assert refusal(zip_of({"py": "x"})) == "the entry 'py' is not a source or text file"
    assert read_archive(zip_of({"Main.PY": "x"}), UploadLimits()) == [SourceFile("Main.PY", "x")]


def test_text_that_sniffs_as_another_type_is_refused_even_without_nul_bytes() -> None:
    head = b"%PDF-1.7\n%abc"
    expected = "the file is not plain text (application/pdf)"
    assert mismatch("text/plain", head, len(head)) == expected


def test_a_comment_ending_in_zero_bytes_does_not_pass_for_an_end_record() -> None:
    data = zip_of({"a.py": "x"}, comment=b"\xff" * 28 + b"\0\0")
    assert read_archive(data, UploadLimits()) == [SourceFile("a.py", "x")]


def test_the_last_end_record_is_the_one_read() -> None:
    def record(entries: int) -> bytes:
        return END + struct.pack("<4H2LH", 0, 0, entries, entries, 0, 0, 0)

    limits = UploadLimits(max_archive_entries=1)
    assert refusal(record(5) + record(0) + b"x", limits) == "the archive holds no files"


def test_an_end_record_beyond_a_comments_reach_of_the_end_is_not_found() -> None:
    data = END + struct.pack("<4H2LH", 0, 0, 5, 5, 0, 0, 0) + b"x" * 0x10000
    limits = UploadLimits(max_archive_entries=1)
    assert refusal(data, limits) == "the file is not a readable zip archive"


def _damaged(method: int, offset: int) -> bytes:
    """An archive of one entry, compressed with `method`, with its stream damaged at
    `offset` bytes past the local header of "a.py" (30 bytes and the name)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=method) as archive:
        archive.writestr("a.py", b"x = 1\n" * 20)
    data = bytearray(buffer.getvalue())
    data[30 + len("a.py") + offset] ^= 0xFF
    return bytes(data)


@pytest.mark.parametrize(
    ("method", "offset"),
    [(zipfile.ZIP_BZIP2, 0), (zipfile.ZIP_LZMA, 4)],
    ids=["bzip2: OSError", "lzma: LZMAError"],
)
def test_a_damaged_compressed_stream_is_refused_not_raised(method: int, offset: int) -> None:
    with pytest.raises(UnsafeArchive, match="cannot be read"):
        read_archive(_damaged(method, offset), UploadLimits())
