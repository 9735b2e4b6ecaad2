"""What the upload use cases decide about a job's stored files, pinned value by value."""

from __future__ import annotations

from pathlib import Path

from shared.domain.uploads import FileRef
from tests.support import files
from tests.unit.test_upload_expiry import Uploads

PNG = files.png()


def _ref(name: str, size: int = len(PNG)) -> FileRef:
    return FileRef(name.rsplit("/", 1)[-1], "image/png", size, "p.png", name)


def test_a_file_is_read_only_up_to_the_size_checked_at_submit(tmp_path: Path) -> None:
    u = Uploads(tmp_path)
    name = u.upload("school-a")
    assert u.service.read(_ref(name)) == PNG
    assert u.service.read(_ref(name, 8)) == PNG[:8]
    assert u.service.read(_ref("")) is None


def test_deleting_a_jobs_files_removes_each_stored_object(tmp_path: Path) -> None:
    u = Uploads(tmp_path)
    first, second, kept = u.upload("school-a"), u.upload("school-a"), u.upload("school-a")
    u.service.delete((_ref(first), _ref(""), _ref(second)))
    assert u.service.read(_ref(first)) is None and u.service.read(_ref(second)) is None
    assert u.service.read(_ref(kept)) == PNG
