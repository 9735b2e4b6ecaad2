"""Admission's decisions: a refusal asked for counts that leave room is a caller's error
that names the counts and the ceilings."""

from __future__ import annotations

import pytest

from shared.domain.admission import ActiveCounts, AdmissionLimits


def test_a_refusal_asked_for_counts_with_room_names_them_and_the_ceilings() -> None:
    limits = AdmissionLimits(per_client=5, backlog=10, retry_after_s=7)
    with pytest.raises(AssertionError) as raised:
        limits.refusal(ActiveCounts(client=4, total=9))
    assert str(raised.value) == (
        "ActiveCounts(client=4, total=9) leave room under "
        "AdmissionLimits(per_client=5, backlog=10, retry_after_s=7)"
    )


@pytest.mark.parametrize(
    ("client", "total", "room"),
    [(0, 0, 10), (1, 7, 3), (2, 9, 1), (0, 10, 0), (3, 12, 0)],
    ids=["empty", "backlog binds", "one left", "backlog full", "past the backlog"],
)
def test_room_is_what_the_backlog_leaves_when_it_is_the_tighter_ceiling(
    client: int, total: int, room: int
) -> None:
    limits = AdmissionLimits(per_client=100, backlog=10)
    assert limits.room(ActiveCounts(client=client, total=total)) == room
