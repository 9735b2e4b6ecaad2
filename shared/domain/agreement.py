"""How far two gradings of the same answers agree: quadratic weighted kappa.

The usual measure in automated essay scoring: 1 is perfect agreement, 0 what chance
would give, below 0 worse than chance. Scores are rounded to whole points first.
"""

from __future__ import annotations

from collections.abc import Sequence


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
