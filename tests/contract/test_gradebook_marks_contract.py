"""What every GradebookMarks must guarantee: a version at or below the mark is stale, one
delivery at a time writes a student's grade, a busy release never spends a version, and
each school's outage is kept from its first failure to its first success."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from shared.adapters.embedded.gradebook_marks import SqliteGradebookMarks
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.domain.gradebook import Begin, HealthState, MarkKey, MarkStatus
from shared.ports import GradebookMarks

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=60)
KEY = MarkKey("school-a", "essay/1", "student|7")


@pytest.fixture(params=["embedded", "google"])
def marks(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """GradebookMarks: SQLite, or Firestore on the official emulator."""
    if request.param == "google":
        from shared.adapters.google.gradebook_marks import FirestoreGradebookMarks

        return FirestoreGradebookMarks(request.getfixturevalue("firestore_clean"))
    return SqliteGradebookMarks(SqliteDatabase(tmp_path / "marks.sqlite3"))


def test_a_written_version_makes_it_and_older_ones_stale(marks: GradebookMarks) -> None:
    assert marks.begin(KEY, 3, "d1", T0, LEASE) is Begin.WRITE
    written = marks.finish(KEY, 3, "d1", MarkStatus.WRITTEN, None, T0)
    assert (written.version, written.status, written.holder) == (3, MarkStatus.WRITTEN, None)
    assert marks.begin(KEY, 3, "d2", T0, LEASE) is Begin.STALE
    assert marks.begin(KEY, 2, "d2", T0, LEASE) is Begin.STALE
    assert marks.begin(KEY, 4, "d2", T0, LEASE) is Begin.WRITE
    stored = marks.mark(KEY)
    assert stored is not None and stored.version == 3 and stored.lease_version == 4


def test_a_finish_never_lowers_the_mark(marks: GradebookMarks) -> None:
    marks.begin(KEY, 5, "new", T0, LEASE)
    marks.finish(KEY, 5, "new", MarkStatus.WRITTEN, None, T0)
    late = marks.finish(KEY, 4, "old", MarkStatus.WRITTEN, None, T0 + timedelta(seconds=1))
    assert late.version == 5
    stored = marks.mark(KEY)
    assert stored is not None and stored.version == 5


def test_a_live_lease_holds_off_another_delivery_until_it_expires(
    marks: GradebookMarks,
) -> None:
    assert marks.begin(KEY, 1, "d1", T0, LEASE) is Begin.WRITE
    assert marks.begin(KEY, 2, "d2", T0 + timedelta(seconds=5), LEASE) is Begin.HELD
    assert marks.begin(KEY, 2, "d2", T0 + LEASE + timedelta(seconds=1), LEASE) is Begin.WRITE


def test_a_busy_release_leaves_the_version_unspent(marks: GradebookMarks) -> None:
    marks.begin(KEY, 1, "d1", T0, LEASE)
    marks.release(KEY, "d1")
    stored = marks.mark(KEY)
    assert stored is not None and (stored.version, stored.holder) == (0, None)
    assert marks.begin(KEY, 1, "d2", T0, LEASE) is Begin.WRITE


def test_rejected_marks_are_listed_per_school(marks: GradebookMarks) -> None:
    other = MarkKey("school-b", "essay/1", "s2")
    for key, at in ((other, T0 + timedelta(seconds=1)), (KEY, T0)):
        marks.begin(key, 1, "d", at, LEASE)
        marks.finish(key, 1, "d", MarkStatus.REJECTED, "course work of another project", at)
    ok = MarkKey("school-a", "essay/1", "s3")
    marks.begin(ok, 1, "d", T0, LEASE)
    marks.finish(ok, 1, "d", MarkStatus.WRITTEN, None, T0)
    assert [m.key for m in marks.rejected()] == [KEY, other]
    [only] = marks.rejected("school-a")
    assert only.detail == "course work of another project"
    assert marks.mark(MarkKey("school-c", "x", "y")) is None


def test_an_outage_runs_from_the_first_failure_to_the_next_success(
    marks: GradebookMarks,
) -> None:
    marks.record_success("school-a", T0)
    first = marks.record_busy("school-a", T0 + timedelta(minutes=1), "HTTP 503", None)
    second = marks.record_busy("school-a", T0 + timedelta(minutes=2), "HTTP 429", 30.0)
    assert (first.state, first.since) == (HealthState.OUTAGE, T0 + timedelta(minutes=1))
    assert (second.since, second.failures, second.last_error, second.retry_after_s) == (
        T0 + timedelta(minutes=1),
        2,
        "HTTP 429",
        30.0,
    )
    marks.record_busy("school/b", T0, "timeout", None)
    health = {h.school: h for h in marks.health()}
    assert health["school-a"].state is HealthState.OUTAGE
    assert health["school/b"].failures == 1
    before, back = marks.record_success("school-a", T0 + timedelta(minutes=3))
    assert before == second
    assert (back.state, back.since, back.failures, back.last_error) == (
        HealthState.OK,
        T0 + timedelta(minutes=3),
        0,
        None,
    )
    assert back.last_success_at == T0 + timedelta(minutes=3)
