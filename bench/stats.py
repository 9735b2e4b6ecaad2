"""The statistics of `make bench`: spreads over runs, percentiles, rate windows, CPU per job.

Pure functions on plain numbers (seconds, counts), so they are unit-tested cheaply.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Spread:
    """The median of several runs with the lowest and highest value."""

    median: float
    low: float
    high: float
    n: int

    def as_dict(self) -> dict[str, float | int]:
        return {"median": self.median, "min": self.low, "max": self.high, "n": self.n}


def spread(values: Iterable[float | None]) -> Spread | None:
    """Median, min and max of the values that are there; None when there is none."""
    present = [float(v) for v in values if v is not None]
    if not present:
        return None
    return Spread(statistics.median(present), min(present), max(present), len(present))


def percentile(values: Sequence[float], pct: float) -> float:
    """The `pct` percentile (0..100), interpolated linearly between the closest ranks."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= pct <= 100:
        raise ValueError(f"percentile must be within 0..100, got {pct}")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * pct / 100
    below = int(rank)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (rank - below)


def max_in_window(times: Iterable[float], window_s: float = 1.0) -> int:
    """The most events in any window of `window_s` seconds, [t, t + window_s)."""
    ordered = sorted(times)
    best = 0
    start = 0
    for end, moment in enumerate(ordered):
        while moment - ordered[start] >= window_s:
            start += 1
        best = max(best, end - start + 1)
    return best


def sustained_rate(times: Iterable[float]) -> float | None:
    """Events per second from the first to the last event; None for fewer than two."""
    ordered = sorted(times)
    if len(ordered) < 2 or ordered[-1] <= ordered[0]:
        return None
    return (len(ordered) - 1) / (ordered[-1] - ordered[0])


def efficiency(ideal_s: float, makespan_s: float) -> float:
    """How close a makespan came to the ideal one (1.0: every slot busy all the time)."""
    if makespan_s <= 0:
        raise ValueError("a makespan must be positive")
    return ideal_s / makespan_s


def cpu_ms_per_job(
    before: Mapping[str, float], after: Mapping[str, float], roles: Iterable[str], jobs: int
) -> float:
    """CPU milliseconds per job spent by `roles` between two snapshots (CPU seconds each)."""
    if jobs <= 0:
        raise ValueError("jobs must be positive")
    return sum(after[role] - before[role] for role in roles) * 1000 / jobs


def ratios(values: Sequence[float | None], reference: Sequence[float | None]) -> list[float | None]:
    """Each run's value over the reference system's value in the same round."""
    if len(values) != len(reference):
        raise ValueError("one reference value per run is needed")
    return [v / r if v is not None and r else None for v, r in zip(values, reference, strict=True)]


def summarize(runs: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float | int]]:
    """The spread of every numeric metric over the runs of one system in one scenario."""
    names: list[str] = []
    for run in runs:
        names.extend(k for k, v in run.items() if _numeric(v) and k not in names)
    summary = {}
    for name in names:
        found = spread(run.get(name) if _numeric(run.get(name)) else None for run in runs)
        if found is not None:
            summary[name] = found.as_dict()
    return summary


def _numeric(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
