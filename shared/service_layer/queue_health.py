"""Queue health from the job store: counts, the oldest waiting job, timing percentiles.

Every figure comes from bounded, indexed store queries: one capped count per status, one
single-job query per waiting status, and the jobs completed in the window (at most
`sample_limit`; `sample_truncated` says when the window held more).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from shared.domain.job import Job
from shared.domain.status import JobStatus
from shared.ports import Clock, JobStore

PERCENTILES = (50, 95, 99)
TIMINGS = ("queue_wait_ms", "processing_ms", "total_ms")
#: The statuses whose oldest job tells how long the queue keeps work waiting.
WAITING = (JobStatus.PENDING, JobStatus.RETRYING)


def percentile(values: list[int], p: int) -> int | None:
    """The nearest-rank percentile of `values` (None for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def _percentiles(jobs: Iterable[Job], timing: str) -> dict[str, int | None]:
    values = [v for v in (j.timings()[timing] for j in jobs) if v is not None]
    return {f"p{p}": percentile(values, p) for p in PERCENTILES}


def _ran(jobs: Iterable[Job]) -> list[Job]:
    """The jobs whose timings describe grading work (cancelled ones are left out)."""
    return [j for j in jobs if j.status in (JobStatus.SUCCEEDED, JobStatus.FAILED)]


@dataclass(frozen=True)
class HealthQuery:
    """The window and the bounds of one health computation."""

    window: timedelta = timedelta(hours=1)
    buckets: int = 12
    sample_limit: int = 1000
    count_cap: int = 10_000


class QueueHealth:
    """Computes the operator's queue figures."""

    def __init__(self, store: JobStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock

    def compute(self, query: HealthQuery | None = None) -> dict[str, Any]:
        query = query or HealthQuery()
        now = self._clock.now()
        since = now - query.window
        counts = self._store.count_by_status(query.count_cap)
        oldest = {s: self._store.find(s, now, 1) for s in WAITING}
        window = self._store.completed_between(since, now, query.sample_limit)
        ran = _ran(window)
        failed = [j for j in ran if j.status is JobStatus.FAILED]
        by_type = Counter(_error_type(j) for j in failed)
        minutes = query.window.total_seconds() / 60
        return {
            "at": now.isoformat(),
            "window_s": int(query.window.total_seconds()),
            "counts": {s.value: counts[s] for s in JobStatus},
            "counts_capped_at": query.count_cap,
            "oldest_waiting_age_s": {
                s.value: _age(now, jobs[0]) if jobs else None for s, jobs in oldest.items()
            },
            "completed": len(window),
            "sample_truncated": len(window) >= query.sample_limit,
            "timings_ms": {t: _percentiles(ran, t) for t in TIMINGS},
            "failure_rate": len(failed) / len(ran) if ran else 0.0,
            "failures_by_type": {
                t: {"count": n, "rate": n / len(ran)} for t, n in sorted(by_type.items())
            },
            "throughput_per_minute": len(window) / minutes,
            "series": _series(window, since, query),
        }


def _error_type(job: Job) -> str:
    assert job.error is not None, "a failed job always records its error"
    return job.error.type


def _age(now: datetime, job: Job) -> float:
    """Seconds since the job last went on the queue (created, or replayed)."""
    return max(0.0, (now - job.updated_at).total_seconds())


def _series(window: list[Job], since: datetime, query: HealthQuery) -> list[dict[str, Any]]:
    """Per time bucket: completions, failures, and the queue wait / processing percentiles."""
    width = query.window / query.buckets
    slots: list[list[Job]] = [[] for _ in range(query.buckets)]
    for job in window:
        assert job.completed_at is not None
        # The width is rounded to microseconds: the window's last instant may land past
        # the last bucket's computed end.
        index = min(query.buckets - 1, int((job.completed_at - since) / width))
        slots[index].append(job)
    return [
        {
            "start": (since + width * i).isoformat(),
            "completed": len(jobs),
            "failed": sum(1 for j in jobs if j.status is JobStatus.FAILED),
            "queue_wait_ms": _percentiles(_ran(jobs), "queue_wait_ms"),
            "processing_ms": _percentiles(_ran(jobs), "processing_ms"),
        }
        for i, jobs in enumerate(slots)
    ]
