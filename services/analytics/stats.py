"""Aggregate the analytics subscriber's records: counts by outcome and median timings."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from statistics import median
from typing import Any

from shared.domain.events import Outcome


def _median(values: list[int]) -> float | None:
    return float(median(values)) if values else None


def summarize(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Count events by outcome; median processing and queue wait over known timings."""
    outcomes: Counter[str] = Counter()
    processing: list[int] = []
    queue_wait: list[int] = []
    for record in records:
        outcomes[record["outcome"]] += 1
        timings = record.get("timings") or {}
        if timings.get("processing_ms") is not None:
            processing.append(timings["processing_ms"])
        if timings.get("queue_wait_ms") is not None:
            queue_wait.append(timings["queue_wait_ms"])
    return {
        "events": sum(outcomes.values()),
        "by_outcome": {outcome.value: outcomes[outcome.value] for outcome in Outcome},
        "median_processing_ms": _median(processing),
        "median_queue_wait_ms": _median(queue_wait),
    }
