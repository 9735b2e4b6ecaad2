"""Agreement's decisions: pairs counted with their multiplicity, the scale's ends and
offset, exact matches to a hundredth, and the errors and undefined cases."""

from __future__ import annotations

import pytest

from shared.domain.agreement import Agreement, agreement_of, quadratic_weighted_kappa


def test_answers_sharing_a_pair_each_count() -> None:
    # Scores 0..2, pairs (0,0) twice and (1,2): weights (i-j)^2/4.
    # Rows 0:2, 1:1; columns 0:2, 2:1; n = 3. Disagreement: (1,2) .25*1 = .25.
    # Expected: (0,2) 1*2*1 + (1,0) .25*1*2 + (1,2) .25*1*1 = 2.75, / 3.
    # kappa = 1 - .25 / (2.75 / 3) = 1 - 3/11 = 8/11.
    assert quadratic_weighted_kappa([0, 0, 1], [0, 0, 2], 0, 2) == pytest.approx(8 / 11)


def test_a_scale_that_does_not_start_at_zero_is_shifted() -> None:
    # The same case one point up the scale: only the distances between scores count.
    assert quadratic_weighted_kappa([1, 1, 2], [1, 1, 3], 1, 3) == pytest.approx(8 / 11)


def test_the_ends_of_the_scale_are_scores_of_their_own() -> None:
    assert quadratic_weighted_kappa([0, 1], [1, 0], 0, 1) == pytest.approx(-1.0)
    assert quadratic_weighted_kappa([1, 2], [1, 2], 1, 2) == 1.0


def test_a_scale_of_one_point_is_undefined() -> None:
    assert quadratic_weighted_kappa([1], [1], 1, 1) is None
    assert quadratic_weighted_kappa([1], [1], 2, 1) is None


def test_gradings_of_different_answers_are_refused() -> None:
    with pytest.raises(ValueError) as raised:
        quadratic_weighted_kappa([1], [1, 2], 0, 2)
    assert str(raised.value) == "the gradings must score the same answers"
    with pytest.raises(ValueError) as raised:
        agreement_of([1], [1, 2], 2)
    assert str(raised.value) == "the gradings must score the same answers"


def test_no_reviewed_answer_gives_no_agreement() -> None:
    assert agreement_of([], [], 10) == Agreement(0, None, None, None)


def test_agreement_counts_matches_to_a_hundredth_and_the_mean_difference() -> None:
    agreement = agreement_of([10, 7.004, 3], [9, 7, 5], 9.5)
    assert agreement.reviewed == 3
    assert agreement.exact_match_rate == pytest.approx(1 / 3)
    assert agreement.mean_absolute_difference == pytest.approx((1 + 0.004 + 2) / 3)


def test_agreement_rounds_a_difference_of_half_a_hundredth_up() -> None:
    assert agreement_of([2, 1.006], [2, 1], 2).exact_match_rate == 0.5


def test_agreement_kappa_is_over_whole_points_up_to_the_max_score_rounded_up() -> None:
    agreement = agreement_of([10, 7, 3], [9, 7, 5], 9.5)
    assert agreement.kappa == quadratic_weighted_kappa([10, 7, 3], [9, 7, 5], 0, 10)
    assert agreement.kappa != quadratic_weighted_kappa([10, 7, 3], [9, 7, 5], 0, 9)


def test_a_scale_below_zero_has_a_bucket_per_point() -> None:
    # The hand-worked case shifted to -1..1.
    assert quadratic_weighted_kappa([-1, -1, 0], [-1, -1, 1], -1, 1) == pytest.approx(8 / 11)
