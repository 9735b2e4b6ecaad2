"""A lane policy's refusals, word by word: an undeclared lane names itself and the
declared lanes (a 400 on the `lane` field); a lane the client may not use names the client
and the lane, and lists the lanes it may use (403)."""

from __future__ import annotations

import pytest

from shared.domain.errors import LaneNotAllowed, ValidationFailed
from shared.domain.lanes import LanePolicy

POLICY = LanePolicy(frozenset({"grading", "bulk", "exam"}), "grading", {"school-a": ("bulk",)})


def test_an_undeclared_lane_is_refused_naming_it_and_the_declared_lanes() -> None:
    with pytest.raises(ValidationFailed) as refused:
        POLICY.resolve("school-a", "nope")
    assert refused.value.detail == "no lane 'nope'; lanes are bulk, exam, grading"
    assert refused.value.extensions == {"errors": [{"field": "lane", "message": "unknown lane"}]}


def test_a_lane_the_client_may_not_use_is_refused_naming_the_client_and_the_lane() -> None:
    with pytest.raises(LaneNotAllowed) as refused:
        POLICY.resolve("school-a", "exam")
    assert refused.value.detail == "client school-a may not use lane 'exam'"
    assert refused.value.extensions == {"lane": "exam", "allowed": ["bulk"]}
