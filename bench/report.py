"""The table of `make bench`: one row per figure, one column per system.

Each cell is the median over the runs with the lowest and highest run in brackets;
"n/a" marks a figure a system cannot have (its note, printed under the table, says why)
and an empty cell one that does not apply to it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from rich.console import Console
from rich.table import Table

from bench.settings import (
    CELERY,
    GRADEQ,
    LABELS,
    PRODUCTION_FRONT,
    RQ,
    SYSTEMS,
    Front,
    Workload,
)

#: summary[scenario][system][metric] = {"median", "min", "max", "n"}
Summary = Mapping[str, Mapping[str, Mapping[str, Mapping[str, float]]]]
#: notes[scenario][system] = why the system has no figure there
Notes = Mapping[str, Mapping[str, str]]

ACCEPTANCE, BURST, RATE, INFLIGHT, IDLE = "acceptance", "burst", "rate", "inflight", "idle"
SCENARIOS = (ACCEPTANCE, BURST, RATE, INFLIGHT, IDLE)
#: The scenarios measured once per front configuration (processes x threads of the fronts).
FRONT_SCENARIOS = (ACCEPTANCE, BURST)


def on_front(scenario: str, front: Front) -> str:
    """The results' key of a front scenario run on `front` (production keeps the bare name)."""
    return scenario if front == PRODUCTION_FRONT else f"{scenario} ({front.tag})"


@dataclass(frozen=True)
class Figure:
    """One row: which metric of which scenario, and how its numbers are written."""

    label: str
    scenario: str
    metric: str
    digits: int
    systems: tuple[str, ...] = (GRADEQ, CELERY, RQ)


def figures(workload: Workload, fronts: Sequence[Front] = (PRODUCTION_FRONT,)) -> list[Figure]:
    """The table's rows, labelled with the workload they were measured on.

    A front scenario's figure has one row per front configuration, side by side, each
    labelled with its processes x threads when there are several.
    """
    rows: list[Figure] = []
    for figure in _figures(workload):
        if figure.scenario not in FRONT_SCENARIOS or len(fronts) < 2:
            rows.append(figure)
            continue
        for front in fronts:
            label = f"[{front.tag}] {figure.label}"
            rows.append(replace(figure, label=label, scenario=on_front(figure.scenario, front)))
    return rows


def _figures(workload: Workload) -> list[Figure]:
    w = workload
    everyone = SYSTEMS
    return [
        Figure(f"acceptance, {w.clients} clients: req/s", ACCEPTANCE, "rps", 0, everyone),
        Figure("acceptance: ratio to bare Flask", ACCEPTANCE, "ratio", 2, everyone),
        Figure("acceptance: p50 ms", ACCEPTANCE, "p50_ms", 1, everyone),
        Figure("acceptance: p99 ms", ACCEPTANCE, "p99_ms", 1, everyone),
        Figure("acceptance: non-2xx and socket errors", ACCEPTANCE, "errors", 0, everyone),
        Figure(
            "acceptance: CPU ms per accepted request, front + store",
            ACCEPTANCE,
            "cpu_accept_ms",
            2,
            everyone,
        ),
        Figure(
            f"burst, {w.burst_jobs} x {w.burst_grade_s:g} s at {w.concurrency}: "
            f"makespan s (ideal {w.ideal_burst_s:.1f})",
            BURST,
            "makespan_s",
            2,
        ),
        Figure("burst: efficiency (ideal / makespan)", BURST, "efficiency", 2),
        Figure("burst: all submitted after s", BURST, "submit_s", 2),
        Figure("burst: subscribers' lag after the last final s", BURST, "lag_s", 2, (GRADEQ,)),
        Figure("CPU ms/job submit to final, no HTTP front", BURST, "cpu_core_ms", 2),
        Figure("CPU ms/job submit to final, with HTTP front", BURST, "cpu_front_core_ms", 2),
        Figure(
            "CPU ms/job with bus and subscribers (no callback URL)",
            BURST,
            "cpu_all_ms",
            2,
            (GRADEQ,),
        ),
        Figure("CPU ms/job: HTTP front (intake / Flask producer)", BURST, "cpu_front_ms", 2),
        Figure("CPU ms/job: worker process(es)", BURST, "cpu_worker_ms", 2),
        Figure("CPU ms/job: queue (dispatcher / Redis)", BURST, "cpu_queue_ms", 2),
        Figure(
            "CPU ms/job: event bus (writes analytics records too)",
            BURST,
            "cpu_bus_ms",
            2,
            (GRADEQ,),
        ),
        Figure("CPU ms/job: notification subscriber", BURST, "cpu_notification_ms", 2, (GRADEQ,)),
        Figure(
            "CPU ms/job: analytics service (reports only)", BURST, "cpu_analytics_ms", 2, (GRADEQ,)
        ),
        Figure(
            "CPU ms/job: gradebook subscriber (posted grades only)",
            BURST,
            "cpu_gradebook_ms",
            2,
            (GRADEQ,),
        ),
        Figure(
            f"rate {w.rate_per_s:g}/s over {w.rate_jobs} jobs: most in any 1 s",
            RATE,
            "max_1s",
            0,
        ),
        Figure("rate: sustained /s", RATE, "sustained", 2),
        Figure(
            f"in flight, {w.inflight_jobs} x {w.inflight_grade_s:g} s in one process: held",
            INFLIGHT,
            "held",
            0,
        ),
        Figure("in flight: all gradings started after s", INFLIGHT, "all_held_after_s", 1),
        Figure("in flight: deliveries refused (503)", INFLIGHT, "refused", 0, (GRADEQ,)),
        Figure("in flight: RSS MB of that process", INFLIGHT, "rss_mb", 0),
        Figure(
            f"idle, {w.idle_jobs} jobs one by one: POST answered ms p50", IDLE, "post_p50_ms", 1
        ),
        Figure("idle: POST to final ms p50", IDLE, "final_p50_ms", 1),
        Figure("idle: POST to final ms p99", IDLE, "final_p99_ms", 1),
        Figure("idle: POST to subscribers ms p50", IDLE, "subscribers_p50_ms", 1, (GRADEQ,)),
        Figure("idle: POST to subscribers ms p99", IDLE, "subscribers_p99_ms", 1, (GRADEQ,)),
    ]


def cell(value: Mapping[str, float] | None, digits: int) -> str:
    """`median (min-max)`, or the median alone for one run or no spread."""
    if value is None:
        return ""
    median, low, high = (f"{value[k]:.{digits}f}" for k in ("median", "min", "max"))
    if value.get("n", 1) <= 1 or low == high:
        return median
    return f"{median} ({low}-{high})"


def rows(
    summary: Summary,
    notes: Notes,
    workload: Workload,
    fronts: Sequence[Front] = (PRODUCTION_FRONT,),
) -> list[list[str]]:
    """Every figure of the scenarios that ran, as [label, one cell per system]."""
    table = []
    for figure in figures(workload, fronts):
        if not summary.get(figure.scenario):
            continue
        cells = [figure.label]
        for system in SYSTEMS:
            value = summary.get(figure.scenario, {}).get(system, {}).get(figure.metric)
            if figure.systems and system not in figure.systems:
                cells.append("")
            elif value is None and system in notes.get(figure.scenario, {}):
                cells.append("n/a")
            else:
                cells.append(cell(value, figure.digits))
        table.append(cells)
    return table


def note_lines(notes: Notes) -> list[str]:
    """The notes under the table, one per system and scenario."""
    return [
        f"{LABELS[system]}, {scenario}: {text}"
        for scenario, by_system in notes.items()
        for system, text in by_system.items()
    ]


def header() -> list[str]:
    return ["", *(LABELS[s] for s in SYSTEMS)]


def markdown(table: Sequence[Sequence[str]]) -> str:
    """The table as GitHub markdown."""
    head = header()
    lines = [
        "| " + " | ".join(head) + " |",
        "| --- |" + " ---: |" * (len(head) - 1),
    ]
    lines.extend("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in table)
    return "\n".join(lines) + "\n"


def print_table(table: Sequence[Sequence[str]], notes: Notes, console: Console) -> None:
    """The table on the terminal, the notes under it."""
    rich_table = Table(*header(), title="make bench: median of the runs (min-max)")
    for row in table:
        rich_table.add_row(*row)
    console.print(rich_table)
    for line in note_lines(notes):
        console.print(f"- {line}")
