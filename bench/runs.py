"""Every run's figures of `make bench`, by scenario and system, and their summary."""

from __future__ import annotations

from typing import Any

from bench import stats
from bench.report import ACCEPTANCE, SCENARIOS
from bench.settings import FLASK


class Results:
    """Every run's figures by scenario and system, and the notes for missing ones."""

    def __init__(self) -> None:
        self.runs: dict[str, dict[str, list[dict[str, Any]]]] = {s: {} for s in SCENARIOS}
        self.notes: dict[str, dict[str, str]] = {s: {} for s in SCENARIOS}

    def add(self, scenario: str, system: str, run: dict[str, Any]) -> None:
        self.runs.setdefault(scenario, {}).setdefault(system, []).append(run)

    def note(self, scenario: str, system: str, text: str) -> None:
        self.notes.setdefault(scenario, {})[system] = text

    def add_ratios(self, scenario: str = ACCEPTANCE) -> None:
        """Each acceptance run's rate over bare Flask's in the same round."""
        runs = self.runs.get(scenario, {})
        reference = [r.get("rps") for r in runs.get(FLASK, [])]
        for system_runs in runs.values():
            if len(system_runs) == len(reference):
                values = [r.get("rps") for r in system_runs]
                for run, ratio in zip(system_runs, stats.ratios(values, reference), strict=True):
                    run["ratio"] = ratio

    def summary(self) -> dict[str, dict[str, dict[str, dict[str, float | int]]]]:
        return {
            scenario: {system: stats.summarize(runs) for system, runs in by_system.items()}
            for scenario, by_system in self.runs.items()
        }
