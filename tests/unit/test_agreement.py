"""Quadratic weighted kappa, checked against values worked out by hand."""

from __future__ import annotations

import pytest

from shared.domain.agreement import quadratic_weighted_kappa


def test_identical_gradings_agree_perfectly() -> None:
    assert quadratic_weighted_kappa([0, 1, 2, 3], [0, 1, 2, 3], 0, 3) == 1.0


def test_a_small_case_worked_by_hand() -> None:
    # Scores 0..2, pairs (0,0) (1,1) (2,1) (2,2). Observed off-diagonal: one pair one
    # apart, weight (1/2)^2 = 0.25, so the weighted disagreement is 0.25.
    # Rows (first): 0:1, 1:1, 2:2; columns (second): 0:1, 1:2, 2:1; n = 4.
    # Expected = sum w_ij r_i c_j / n: (0,1) .25*1*2 + (0,2) 1*1*1 + (1,0) .25*1*1
    # + (1,2) .25*1*1 + (2,0) 1*2*1 + (2,1) .25*2*2 = .5+1+.25+.25+2+1 = 5, / 4 = 1.25.
    # kappa = 1 - 0.25 / 1.25 = 0.8.
    kappa = quadratic_weighted_kappa([0, 1, 2, 2], [0, 1, 1, 2], 0, 2)
    assert kappa == pytest.approx(0.8)


def test_reversed_gradings_disagree_completely() -> None:
    # Every answer moves to the opposite end: as bad as it gets, -1.
    assert quadratic_weighted_kappa([0, 2], [2, 0], 0, 2) == pytest.approx(-1.0)


def test_scores_are_rounded_and_clamped_to_the_scale() -> None:
    assert quadratic_weighted_kappa([0.4, 1.6, 9], [0, 2, 2], 0, 2) == 1.0


def test_undefined_cases_are_none() -> None:
    assert quadratic_weighted_kappa([], [], 0, 10) is None
    assert quadratic_weighted_kappa([3, 3], [3, 3], 0, 10) is None
    with pytest.raises(ValueError):
        quadratic_weighted_kappa([1], [1, 2], 0, 2)
