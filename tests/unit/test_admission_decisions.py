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
