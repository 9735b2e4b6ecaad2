"""Whatever bytes an upload holds, the check at submit accepts it or refuses it with an
upload problem (a 4xx): it never raises anything else (a 5xx)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.clock import FrozenClock
from shared.domain.uploads import ALLOWED_TYPES, FileRef, UploadLimits, UploadRefused, object_name
from shared.service_layer.uploads import UploadService
from tests.support import files
from tests.unit.test_grader_files import MemoryBlobs

LIMITS = UploadLimits(max_archive_entries=5, max_archive_expanded_bytes=4096)
VALID = {
    "image/png": files.png(),
    "application/pdf": files.pdf(),
    "application/zip": files.zip_of({"a.py": b"x = 1\n", "b/c.md": b"# t\n"}),
    "text/plain": b"plain words\n",
}


def _check(content_type: str, data: bytes) -> bool:
    """Whether the file is accepted; any error but an upload problem propagates."""
    blobs = MemoryBlobs(cloud=False)
    blobs.objects[object_name("c", "up_fuzz")] = (data, content_type)
    service = UploadService(blobs, FrozenClock(), LIMITS)
    try:
        service.verify("c", (FileRef("up_fuzz", content_type, len(data)),))
    except UploadRefused:
        return False
    return True


def test_the_undamaged_files_are_accepted() -> None:
    assert all(_check(content_type, data) for content_type, data in VALID.items())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(ALLOWED_TYPES)), st.binary(min_size=1, max_size=3000))
def test_random_bytes_are_accepted_or_refused_as_a_4xx(content_type: str, data: bytes) -> None:
    _check(content_type, data)


@settings(max_examples=1000, deadline=None)
@given(
    st.sampled_from(sorted(VALID)),
    st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 255)), min_size=1, max_size=8),
)
def test_damaged_valid_files_are_accepted_or_refused_as_a_4xx(
    content_type: str, edits: list[tuple[int, int]]
) -> None:
    data = bytearray(VALID[content_type])
    for at, value in edits:
        data[at % len(data)] = value
    _check(content_type, bytes(data))
