"""A lane policy's refusals, word by word: an undeclared lane names itself and the
declared lanes (a 400 on the `lane` field); a lane the client may not use names the client
and the lane, and lists the lanes it may use (403). At start-up, a malformed client list
and an undeclared default lane are refused in their own words."""

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


LANES = frozenset({"grading", "bulk", "exam"})
MALFORMED = "GRADEQ_CLIENT_LANES looks like 'acme=exam|grading,*=grading'"


@pytest.mark.parametrize("text", ["acme", "acme=", "acme= | ", "=exam", " =exam", "acme,=bulk"])
def test_a_client_list_entry_without_a_client_or_a_lane_is_malformed(text: str) -> None:
    with pytest.raises(ValueError) as refused:
        LanePolicy.parse(LANES, "grading", text)
    assert str(refused.value) == MALFORMED


def test_a_client_list_entry_is_split_at_its_first_equals_sign() -> None:
    with pytest.raises(ValueError) as refused:
        LanePolicy.parse(LANES, "grading", "acme=exam=bulk")
    assert str(refused.value) == "client 'acme' lists undeclared lanes ['exam=bulk']"


def test_a_default_lane_that_is_not_declared_is_refused_naming_it() -> None:
    with pytest.raises(ValueError) as refused:
        LanePolicy.parse(LANES, "express", "")
    assert str(refused.value) == "the default lane 'express' is not declared"
