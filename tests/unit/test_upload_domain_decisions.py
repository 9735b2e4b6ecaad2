"""The upload vocabulary's decisions: kinds, ids, object names, the stored FileRef.

Object names are where uploads live in the blob store: a change to how one is derived
loses every stored upload, so they are pinned as literals.
"""

from __future__ import annotations

import pytest

from shared.domain.uploads import (
    FileKind,
    FileRef,
    UploadQuotaExceeded,
    kind_of,
    new_upload_id,
    object_name,
    student_prefix,
)

OWNER_C = "uploads/2e7d2c03a9507ae265ecf5b5356885a5/"


def test_each_allowed_type_has_its_kind_and_others_none() -> None:
    assert kind_of("image/webp") is FileKind.IMAGE
    assert kind_of("application/pdf") is FileKind.PDF
    assert kind_of("text/csv") is FileKind.TEXT
    assert kind_of("application/zip") is FileKind.ARCHIVE
    assert kind_of("application/x-msdownload") is None


def test_an_upload_id_is_up_and_24_urlsafe_characters_never_repeated() -> None:
    ids = {new_upload_id() for _ in range(50)}
    assert len(ids) == 50
    for upload_id in ids:
        assert upload_id.startswith("up_")
        assert len(upload_id) == 27
        assert set(upload_id[3:]) <= set(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        )


def test_an_uploads_object_lives_under_its_clients_digest() -> None:
    assert object_name("c", "up_1") == OWNER_C + "up_1"
    assert object_name("d", "up_1").startswith("uploads/18ac3e7343f016890c510e93f9352611/")


def test_an_upload_made_for_a_student_lives_under_the_students_prefix() -> None:
    prefix = OWNER_C + "students/b1b2060790a2bb4b6835e30a216636de/"
    assert student_prefix("c", "s1") == prefix
    assert object_name("c", "up_1", "s1") == prefix + "up_1"
    assert student_prefix("c", "s2") == OWNER_C + "students/5ac2b0c8a2ead8ea1a3c9269169b4356/"
    assert student_prefix("d", "s1") == (
        "uploads/18ac3e7343f016890c510e93f9352611/students/fa5a281c97857b7f9e13eceea7647176/"
    )


def test_a_fileref_has_the_kind_of_its_type_and_refuses_another() -> None:
    assert FileRef("up_1", "image/png", 3).kind is FileKind.IMAGE
    with pytest.raises(ValueError) as raised:
        _ = FileRef("up_1", "video/mp4", 3).kind
    assert str(raised.value) == "video/mp4 is not an allowed type"


def test_a_fileref_round_trips_through_its_record() -> None:
    ref = FileRef("up_1", "text/plain", 12, name="a.txt", object=OWNER_C + "up_1")
    record = ref.to_dict()
    assert record == {
        "upload_id": "up_1",
        "content_type": "text/plain",
        "size": 12,
        "name": "a.txt",
        "object": OWNER_C + "up_1",
    }
    assert FileRef.from_dict(record) == ref


def test_a_record_without_name_or_object_reads_them_empty_and_its_size_as_int() -> None:
    record = {"upload_id": "up_1", "content_type": "text/plain", "size": "12", "name": None}
    assert FileRef.from_dict(record) == FileRef("up_1", "text/plain", 12, "", "")
    assert FileRef.from_dict(record).size == 12


def test_a_quota_refusal_carries_its_limit_and_retry_after() -> None:
    error = UploadQuotaExceeded("over the day's bytes", retry_after_s=30, limit=1000)
    assert error.detail == "over the day's bytes"
    assert error.extensions == {"limit": 1000}
    assert error.retry_after_s == 30
    assert error.status == 429
    assert error.type_uri == "https://gradeq.dev/problems/upload-quota-exceeded"
