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


_USAGE_FIELDS = (
    "requests",
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "total_tokens",
    "cost_micro_usd",
)


def usage_totals(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Token usage and cost summed per client and per assignment, each split by model.

    Prices differ per model, so the cost (`cost_micro_usd`, from the price table when the
    grading was recorded) is kept per model too. `cache_hit_ratio` is the share of input
    tokens the provider served from its prefix cache (None before any input). Events
    without a model (the offline grader, failed jobs) are left out.
    """
    by_client: dict[str, dict[str, dict[str, int]]] = {}
    by_assignment: dict[str, dict[str, dict[str, int]]] = {}
    for record in records:
        model, usage = record.get("model"), record.get("usage")
        if not model or not usage:
            continue
        assignment = record.get("assignment_id") or "(none)"
        for table, key in ((by_client, record["client_id"]), (by_assignment, assignment)):
            totals = table.setdefault(key, {}).setdefault(
                model, {"jobs": 0, **dict.fromkeys(_USAGE_FIELDS, 0)}
            )
            totals["jobs"] += 1
            for field in _USAGE_FIELDS:
                totals[field] += int(usage.get(field, 0))
    return {
        "by_client": _with_hit_ratios(by_client),
        "by_assignment": _with_hit_ratios(by_assignment),
    }


def _with_hit_ratios(
    table: dict[str, dict[str, dict[str, int]]],
) -> dict[str, dict[str, dict[str, Any]]]:
    return {
        key: {
            model: {**totals, "cache_hit_ratio": _ratio(totals)} for model, totals in models.items()
        }
        for key, models in table.items()
    }


def _ratio(totals: Mapping[str, int]) -> float | None:
    inputs = totals["input_tokens"]
    return round(totals["cached_input_tokens"] / inputs, 4) if inputs else None
