"""Human output of the CLI (rich); `--json` bypasses all of it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.table import Column, Table

STYLES = {"SUCCEEDED": "green", "FAILED": "red", "CANCELLED": "yellow", "RUNNING": "cyan"}
CHECK_MARKS = {"ok": "[green]ok[/]", "failed": "[red]FAILED[/]", "skipped": "[yellow]skipped[/]"}


def id_column(header: str) -> Column:
    """A column of ids, copied into the next command: kept whole on one line.

    The table's other columns wrap first; only a console narrower than the ids
    themselves cuts them.
    """
    return Column(header, no_wrap=True)


def text_column(header: str) -> Column:
    """A column of text that wraps onto more lines rather than being cut short."""
    return Column(header, overflow="fold")


def seconds(ms: int | None) -> str:
    return "-" if ms is None else f"{ms / 1000:.1f}s"


def _status(status: str) -> str:
    style = STYLES.get(status)
    return f"[{style}]{status}[/]" if style else status


def elapsed(job: dict[str, Any], now: datetime | None = None) -> str:
    created = datetime.fromisoformat(str(job["created_at"]).replace("Z", "+00:00"))
    end = job.get("completed_at")
    until = datetime.fromisoformat(end.replace("Z", "+00:00")) if end else now or datetime.now(UTC)
    return f"{max(0.0, (until - created).total_seconds()):.1f}s"


def job_panel(job: dict[str, Any]) -> Table:
    """One job: state, attempts, elapsed, queue wait vs processing, and its outcome."""
    table = Table(show_header=False, box=None, title=f"job {job['id']}")
    timings = job.get("timings") or {}
    table.add_row("state", _status(job["status"]))
    if job.get("lane"):
        table.add_row("lane", str(job["lane"]))
    waiting = job.get("waiting")
    if waiting and waiting.get("kind") == "budget-hold":
        table.add_row("waiting", f"held: its budget is spent, since {waiting['since']}")
    elif waiting:
        batch = waiting.get("batch_id") or "the next batch (gathering)"
        table.add_row("waiting", f"in {waiting['provider']} batch {batch} since {waiting['since']}")
    table.add_row("attempts", str(job.get("attempts", 0)))
    table.add_row("elapsed", elapsed(job))
    table.add_row("queue wait", seconds(timings.get("queue_wait_ms")))
    table.add_row("processing", seconds(timings.get("processing_ms")))
    result = job.get("result")
    if result:
        table.add_row("score", f"{result['score']:g} / {result['max_score']:g}")
        for criterion in result.get("criteria") or ():
            mark = "[green]✓[/]" if criterion.get("met") else "[red]✗[/]"
            table.add_row(mark, str(criterion.get("criterion", "")))
    error = job.get("error") or job.get("last_error")
    if error:
        table.add_row("error", f"{error['type']}: {error['message']}")
    return table


def jobs_table(jobs: list[dict[str, Any]], title: str) -> Table:
    table = Table(title=title)
    table.add_column("id", no_wrap=True)  # copied into the next command: never wrapped
    for column in ("client", "lane", "status", "attempts", "created", "queue wait", "processing"):
        table.add_column(column)
    table.add_column("last error", overflow="fold")
    for job in jobs:
        timings = job.get("timings") or {}
        error = job.get("last_error")
        table.add_row(
            job["id"],
            job.get("client_id") or "",
            job.get("lane") or "",
            _status(job["status"]),
            str(job.get("attempts", 0)),
            str(job.get("created_at") or ""),
            seconds(timings.get("queue_wait_ms")),
            seconds(timings.get("processing_ms")),
            f"{error['type']}: {error['message']}" if error else "",
        )
    return table


def health_tables(health: dict[str, Any]) -> list[Table]:
    counts = Table(title="jobs by status")
    for status in health["counts"]:
        counts.add_column(status)
    counts.add_row(*(str(n) for n in health["counts"].values()))
    timings = Table(title=f"last {health['window_s'] // 60} min: {health['completed']} completed")
    timings.add_column("timing")
    for p in ("p50", "p95", "p99"):
        timings.add_column(p)
    for name, values in health["timings_ms"].items():
        timings.add_row(
            name.removesuffix("_ms"), *(seconds(values[p]) for p in ("p50", "p95", "p99"))
        )
    queue = Table(show_header=False, box=None)
    for status, age in health["oldest_waiting_age_s"].items():
        queue.add_row(f"oldest {status}", "-" if age is None else f"{age:.0f}s")
    queue.add_row("failure rate", f"{health['failure_rate']:.1%}")
    for kind, figures in health["failures_by_type"].items():
        queue.add_row(f"  {kind}", f"{figures['count']} ({figures['rate']:.1%})")
    queue.add_row("throughput", f"{health['throughput_per_minute']:.2f}/min")
    return [counts, timings, queue]


def lanes_table(lanes: list[dict[str, Any]]) -> Table:
    """Per lane: state, backlog, oldest waiting job's age against its objective, waits."""
    table = Table(title="lanes")
    for column in ("lane", "state", "backlog", "oldest", "objective", "wait p50", "wait p99"):
        table.add_column(column)
    for lane in lanes:
        age, objective = lane["oldest_age_s"], lane["oldest_age_objective_s"]
        oldest = "-" if age is None else f"{age:.0f}s"
        if lane["objective_breached"]:
            oldest = f"[red]{oldest}[/]"
        wait = lane["queue_wait_ms"]
        table.add_row(
            lane["lane"],
            "[yellow]paused[/]" if lane["paused"] else "running",
            str(lane["backlog"]),
            oldest,
            "-" if objective is None else f"{objective:.0f}s",
            seconds(wait["p50"]),
            seconds(wait["p99"]),
        )
    return table


def quota_table(pools: list[dict[str, Any]]) -> Table:
    """Per model: the quota mode and limit, the window's use by lane, waiting jobs, and
    the adaptive controller's last decision."""
    table = Table(title="provider quota")
    for column in ("model", "mode", "limit", "in window", "by lane", "waiting", "last epoch"):
        table.add_column(column)
    for pool in pools:
        if pool["mode"] == "instance":
            limit = f"{pool['share_rpm']}/min per instance (x{pool['max_instances']})"
            table.add_row(pool["model"], "instance", limit, "-", "-", "-", "-")
            continue
        limit = f"{pool['limit_rpm']} req"
        if pool["limit_tpm"]:
            limit += f", {pool['limit_tpm']} tok"
        used = f"{pool['requests_in_window']} req, {pool['tokens_in_window']} tok"
        epoch = pool.get("adaptive", {}).get("last_epoch") or {}
        last = "-"
        if epoch:
            last = f"{epoch['decision']}: {epoch['throttled']}/{epoch['answered']} 429"
        table.add_row(
            pool["model"],
            pool["mode"],
            f"{limit} / {pool['window_s']:g}s",
            used,
            _pairs(pool["requests_by_lane"]),
            _pairs(pool["waiting_by_lane"]),
            last,
        )
    return table


def _pairs(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "-"


def print_all(console: Console, *renderables: Any) -> None:
    for item in renderables:
        console.print(item)


def doctor_table(checks: list[dict[str, Any]], target: str) -> Table:
    """`gradeq doctor`'s checks in order: when each ended, its verdict, what it saw."""
    table = Table(title=f"gradeq doctor: {target}")
    for column in ("at", "check", "", "saw"):
        table.add_column(column)
    for check in checks:
        table.add_row(
            f"{check['at_ms'] / 1000:.2f}s",
            check["check"],
            CHECK_MARKS[check["status"]],
            check["detail"],
        )
    return table
