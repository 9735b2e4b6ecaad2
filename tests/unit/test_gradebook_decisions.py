"""The gradebook's decisions: the document id of a mark, who may write a student's grade
and when (stale, held, leased), what a finished or released write leaves behind, the
stored and public shapes of a mark, and a school's gradebook health across successes and
busy answers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from shared.domain.gradebook import (
    Begin,
    GradebookHealth,
    GradeMark,
    HealthState,
    MarkKey,
    MarkStatus,
    safe_id,
)

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=30)
KEY = MarkKey("north-high", "essay-1", "s-7")


def _leased(holder: str = "a", until: datetime | None = None, version: int = 3) -> GradeMark:
    return GradeMark(
        KEY,
        version=2,
        status=MarkStatus.WRITTEN,
        detail="ok",
        updated_at=T0,
        holder=holder,
        lease_version=version,
        lease_until=until if until is not None else T0 + LEASE,
    )


# --- ids -------------------------------------------------------------------------------


def test_safe_id_escapes_the_escape_first_then_the_separators() -> None:
    assert safe_id("a%b|c/d") == "a%25b%7Cc%2Fd"
    assert safe_id("%7C") == "%257C"
    assert safe_id("plain") == "plain"


def test_the_document_id_joins_the_escaped_parts_with_a_bar() -> None:
    assert MarkKey("s|1", "a/2", "st%3").document_id() == "s%7C1|a%2F2|st%253"
    assert KEY.document_id() == "north-high|essay-1|s-7"


def test_a_fresh_mark_has_seen_nothing() -> None:
    mark = GradeMark(KEY)
    assert (mark.version, mark.status, mark.detail, mark.updated_at) == (
        0,
        MarkStatus.NONE,
        None,
        None,
    )
    assert (mark.holder, mark.lease_version, mark.lease_until) == (None, None, None)


# --- begin -----------------------------------------------------------------------------


def test_a_version_at_or_below_the_mark_is_stale_and_changes_nothing() -> None:
    mark = GradeMark(KEY, version=4, status=MarkStatus.WRITTEN)
    for version in (4, 3):
        answer, after = mark.begin(version, "a", T0, LEASE)
        assert answer is Begin.STALE
        assert after is mark


def test_a_newer_version_on_a_free_mark_takes_the_lease() -> None:
    mark = GradeMark(KEY, version=4, status=MarkStatus.WRITTEN, detail="d", updated_at=T0)
    answer, after = mark.begin(5, "a", T0, LEASE)
    assert answer is Begin.WRITE
    assert after == GradeMark(
        KEY,
        version=4,
        status=MarkStatus.WRITTEN,
        detail="d",
        updated_at=T0,
        holder="a",
        lease_version=5,
        lease_until=T0 + LEASE,
    )


def test_the_first_version_of_a_fresh_mark_may_be_written() -> None:
    answer, after = GradeMark(KEY).begin(1, "a", T0, LEASE)
    assert answer is Begin.WRITE
    assert after.lease_version == 1


def test_another_holders_live_lease_holds_the_delivery_back() -> None:
    mark = _leased("a", T0 + timedelta(seconds=1))
    answer, after = mark.begin(3, "b", T0, LEASE)
    assert answer is Begin.HELD
    assert after is mark


def test_a_lease_ending_now_has_expired_and_is_taken_over() -> None:
    mark = _leased("a", T0)
    answer, after = mark.begin(3, "b", T0, LEASE)
    assert answer is Begin.WRITE
    assert (after.holder, after.lease_version, after.lease_until) == ("b", 3, T0 + LEASE)


def test_the_holder_itself_renews_its_own_lease() -> None:
    mark = _leased("a", T0 + timedelta(seconds=10))
    answer, after = mark.begin(4, "a", T0, LEASE)
    assert answer is Begin.WRITE
    assert (after.holder, after.lease_version, after.lease_until) == ("a", 4, T0 + LEASE)


def test_a_holder_without_a_lease_end_does_not_hold() -> None:
    mark = GradeMark(KEY, version=1, holder="a", lease_version=2, lease_until=None)
    answer, after = mark.begin(2, "b", T0, LEASE)
    assert answer is Begin.WRITE
    assert after.holder == "b"


def test_a_lease_end_without_a_holder_does_not_hold() -> None:
    mark = GradeMark(KEY, version=1, holder=None, lease_until=T0 + LEASE)
    answer, after = mark.begin(2, "b", T0, LEASE)
    assert answer is Begin.WRITE
    assert after.holder == "b"


# --- finish and release ----------------------------------------------------------------


def test_finishing_a_newer_version_records_it_and_frees_the_lease() -> None:
    at = T0 + timedelta(seconds=5)
    after = _leased("a").finish(3, "a", MarkStatus.REJECTED, "bad score", at)
    assert after == GradeMark(
        KEY, version=3, status=MarkStatus.REJECTED, detail="bad score", updated_at=at
    )


def test_finishing_an_old_version_only_frees_the_lease() -> None:
    after = _leased("a").finish(2, "a", MarkStatus.REJECTED, "late", T0 + LEASE)
    assert after == GradeMark(KEY, version=2, status=MarkStatus.WRITTEN, detail="ok", updated_at=T0)


def test_finishing_under_someone_elses_lease_keeps_their_lease() -> None:
    at = T0 + timedelta(seconds=5)
    after = _leased("a").finish(5, "b", MarkStatus.WRITTEN, None, at)
    assert after == GradeMark(
        KEY,
        version=5,
        status=MarkStatus.WRITTEN,
        detail=None,
        updated_at=at,
        holder="a",
        lease_version=3,
        lease_until=T0 + LEASE,
    )
    stale = _leased("a")
    assert stale.finish(1, "b", MarkStatus.WRITTEN, None, at) is stale


def test_releasing_frees_only_the_holders_own_lease() -> None:
    mark = _leased("a")
    assert mark.release("a") == GradeMark(
        KEY, version=2, status=MarkStatus.WRITTEN, detail="ok", updated_at=T0
    )
    assert mark.release("b") is mark


# --- stored and public shapes ----------------------------------------------------------


def test_a_mark_is_stored_with_every_field_and_read_back_whole() -> None:
    mark = _leased("a")
    record = mark.to_record()
    assert record == {
        "school": "north-high",
        "assignment_id": "essay-1",
        "student_id": "s-7",
        "version": 2,
        "status": "written",
        "detail": "ok",
        "updated_at": T0,
        "holder": "a",
        "lease_version": 3,
        "lease_until": T0 + LEASE,
    }
    assert GradeMark.from_record(record) == mark


def test_a_stored_mark_without_its_optional_fields_reads_as_unset() -> None:
    record = {
        "school": "north-high",
        "assignment_id": "essay-1",
        "student_id": "s-7",
        "version": "6",
        "status": "rejected",
    }
    mark = GradeMark.from_record(record)
    assert mark == GradeMark(KEY, version=6, status=MarkStatus.REJECTED)
    assert isinstance(mark.version, int)
    assert isinstance(mark.status, MarkStatus)


def test_the_public_view_of_a_mark_leaves_the_lease_out() -> None:
    assert _leased("a").as_dict() == {
        "school": "north-high",
        "assignment_id": "essay-1",
        "student_id": "s-7",
        "version": 2,
        "status": "written",
        "detail": "ok",
        "updated_at": "2026-03-01T12:00:00+00:00",
    }
    assert GradeMark(KEY).as_dict() == {
        "school": "north-high",
        "assignment_id": "essay-1",
        "student_id": "s-7",
        "version": 0,
        "status": "none",
        "detail": None,
        "updated_at": None,
    }


# --- health ----------------------------------------------------------------------------


def test_a_fresh_health_is_ok_with_nothing_seen() -> None:
    health = GradebookHealth("north-high")
    assert health == GradebookHealth("north-high", HealthState.OK, None, 0, None, None, None)


def test_the_first_success_starts_the_ok_period() -> None:
    at = T0 + timedelta(minutes=1)
    assert GradebookHealth("north-high").after_success(at) == GradebookHealth(
        "north-high", HealthState.OK, at, 0, None, at, None
    )


def test_a_success_while_ok_keeps_the_start_of_the_ok_period() -> None:
    at = T0 + timedelta(minutes=5)
    health = GradebookHealth("north-high", HealthState.OK, T0, 0, None, T0, None)
    assert health.after_success(at) == GradebookHealth(
        "north-high", HealthState.OK, T0, 0, None, at, None
    )


def test_a_success_ends_an_outage_and_clears_its_traces() -> None:
    at = T0 + timedelta(minutes=5)
    health = GradebookHealth("north-high", HealthState.OUTAGE, T0, 3, "busy", None, 30.0)
    assert health.after_success(at) == GradebookHealth(
        "north-high", HealthState.OK, at, 0, None, at, None
    )


def test_the_first_busy_answer_starts_an_outage() -> None:
    at = T0 + timedelta(minutes=2)
    health = GradebookHealth("north-high", HealthState.OK, T0, 0, None, T0, None)
    assert health.after_busy(at, "429 from the LMS", 12.5) == GradebookHealth(
        "north-high", HealthState.OUTAGE, at, 1, "429 from the LMS", T0, 12.5
    )


def test_further_busy_answers_count_up_and_keep_the_outage_start() -> None:
    at = T0 + timedelta(minutes=9)
    health = GradebookHealth("north-high", HealthState.OUTAGE, T0, 2, "old", T0, 5.0)
    assert health.after_busy(at, "new", None) == GradebookHealth(
        "north-high", HealthState.OUTAGE, T0, 3, "new", T0, None
    )


def test_an_outage_without_a_start_starts_at_the_busy_answer() -> None:
    at = T0 + timedelta(minutes=9)
    health = GradebookHealth("north-high", HealthState.OUTAGE, None, 2, "old", None, None)
    assert health.after_busy(at, "new", 7.0) == GradebookHealth(
        "north-high", HealthState.OUTAGE, at, 3, "new", None, 7.0
    )


def test_a_health_is_stored_with_every_field_and_read_back_whole() -> None:
    health = GradebookHealth("north-high", HealthState.OUTAGE, T0, 4, "busy", T0 - LEASE, 12.5)
    record = health.to_record()
    assert record == {
        "school": "north-high",
        "state": "outage",
        "since": T0,
        "failures": 4,
        "last_error": "busy",
        "last_success_at": T0 - LEASE,
        "retry_after_s": 12.5,
    }
    assert GradebookHealth.from_record(record) == health


def test_a_stored_health_without_its_optional_fields_reads_as_unset() -> None:
    health = GradebookHealth.from_record({"school": "north-high", "state": "ok"})
    assert health == GradebookHealth("north-high")
    assert isinstance(health.state, HealthState)
    read = GradebookHealth.from_record({"school": "s", "state": "outage", "failures": None})
    assert read.failures == 0
    counted = GradebookHealth.from_record({"school": "s", "state": "ok", "failures": "3"})
    assert counted.failures == 3


def test_the_public_view_of_a_health_gives_its_moments_as_iso_text() -> None:
    health = GradebookHealth("north-high", HealthState.OUTAGE, T0, 1, "busy", T0 - LEASE, 3.0)
    assert health.as_dict() == {
        "school": "north-high",
        "state": "outage",
        "since": "2026-03-01T12:00:00+00:00",
        "failures": 1,
        "last_error": "busy",
        "last_success_at": "2026-03-01T11:59:30+00:00",
        "retry_after_s": 3.0,
    }
    assert GradebookHealth("north-high").as_dict() == {
        "school": "north-high",
        "state": "ok",
        "since": None,
        "failures": 0,
        "last_error": None,
        "last_success_at": None,
        "retry_after_s": None,
    }
