"""How far two gradings of the same answers agree: quadratic weighted kappa.

The usual measure in automated essay scoring: 1 is perfect agreement, 0 what chance
would give, below 0 worse than chance. Scores are rounded to whole points first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


def quadratic_weighted_kappa(
    first: Sequence[float], second: Sequence[float], low: int, high: int
) -> float | None:
    """Cohen's kappa with quadratic weights over the whole points `low`..`high`.

    None when it is undefined: no pairs, or both gradings give everyone one same score.
    """
    if len(first) != len(second):
        raise ValueError("the gradings must score the same answers")
    n = len(first)
    if n == 0 or high <= low:
        return None
    size = high - low + 1

    def bucket(score: float) -> int:
        return min(max(round(score), low), high) - low

    observed = [[0] * size for _ in range(size)]
    for a, b in zip(first, second, strict=True):
        observed[bucket(a)][bucket(b)] += 1
    rows = [sum(row) for row in observed]
    cols = [sum(observed[i][j] for i in range(size)) for j in range(size)]
    disagreement = expected = 0.0
    for i in range(size):
        for j in range(size):
            weight = (i - j) ** 2 / (size - 1) ** 2
            disagreement += weight * observed[i][j]
            expected += weight * rows[i] * cols[j] / n
    if expected == 0:
        return None
    return 1.0 - disagreement / expected


@dataclass(frozen=True)
class Agreement:
    """How model and teacher agree on reviewed grades: exact matches, mean absolute
    difference and quadratic weighted kappa (None where undefined)."""

    reviewed: int
    exact_match_rate: float | None
    mean_absolute_difference: float | None
    kappa: float | None


def agreement_of(model: Sequence[float], teacher: Sequence[float], max_score: float) -> Agreement:
    """The agreement of the model's scores with the teacher's on the same answers.

    An exact match is the same score to a hundredth; kappa uses whole points 0..max_score.
    """
    if len(model) != len(teacher):
        raise ValueError("the gradings must score the same answers")
    n = len(model)
    if n == 0:
        return Agreement(0, None, None, None)
    exact = sum(1 for m, t in zip(model, teacher, strict=True) if round(m - t, 2) == 0)
    difference = sum(abs(m - t) for m, t in zip(model, teacher, strict=True))
    kappa = quadratic_weighted_kappa(model, teacher, 0, math.ceil(max_score))
    return Agreement(n, exact / n, difference / n, kappa)
