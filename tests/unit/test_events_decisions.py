"""How an event is read back from its payload, pinned value by value."""

from __future__ import annotations

from datetime import UTC, datetime

from shared.domain.assignment import Tally
from shared.domain.events import AssignmentGraded
from shared.domain.ids import assignment_graded_event_id
from shared.domain.status import JobStatus

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _data(mean: object) -> dict[str, object]:
    return {
        "assignment_id": "a1",
        "client_id": "c",
        "round": "2",
        "submissions": 3,
        "succeeded": 1,
        "failed": 1,
        "cancelled": 1,
        "mean_score": mean,
    }


def test_a_round_with_no_grade_reads_back_without_a_mean() -> None:
    event = AssignmentGraded.from_data("e1", T0, _data(None))
    assert event.mean_score is None
    assert event.data() == {**_data(None), "round": 2}
    assert (event.event_id, event.occurred_at) == ("e1", T0)


def test_a_rounds_mean_reads_back_as_a_float() -> None:
    event = AssignmentGraded.from_data("e1", T0, _data(7))
    assert event.mean_score == 7.0 and isinstance(event.mean_score, float)


def test_a_rounds_event_counts_its_submissions_by_outcome() -> None:
    counts = {JobStatus.SUCCEEDED: 4, JobStatus.FAILED: 2, JobStatus.CANCELLED: 1}
    tally = Tally(counts=counts, score_sum=30.0, scored=4)
    event = AssignmentGraded.of("a1", "c", 2, tally, T0)
    assert event == AssignmentGraded(
        event_id=assignment_graded_event_id("a1", 2, 7),
        assignment_id="a1",
        client_id="c",
        round=2,
        submissions=7,
        succeeded=4,
        failed=2,
        cancelled=1,
        mean_score=7.5,
        occurred_at=T0,
    )
    assert event.data() == {
        "assignment_id": "a1",
        "client_id": "c",
        "round": 2,
        "submissions": 7,
        "succeeded": 4,
        "failed": 2,
        "cancelled": 1,
        "mean_score": 7.5,
    }


def test_a_round_missing_an_outcome_counts_none_of_it() -> None:
    event = AssignmentGraded.of("a1", "c", 0, Tally(counts={JobStatus.FAILED: 3}), T0)
    assert (event.submissions, event.succeeded, event.failed, event.cancelled) == (3, 0, 3, 0)
    assert event.mean_score is None


def test_a_round_with_no_failure_counts_no_failed_submission() -> None:
    event = AssignmentGraded.of("a1", "c", 0, Tally(counts={JobStatus.SUCCEEDED: 2}), T0)
    assert (event.submissions, event.succeeded, event.failed, event.cancelled) == (2, 2, 0, 0)
