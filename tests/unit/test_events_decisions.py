"""How an event is read back from its payload, pinned value by value."""

from __future__ import annotations

from datetime import UTC, datetime

from shared.domain.events import AssignmentGraded

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
