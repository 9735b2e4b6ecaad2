"""The `gradeq` commands.

Exit codes: 0 done (a watched job SUCCEEDED); 2 usage or a missing credential; 3 the job
FAILED; 4 the job was CANCELLED; 5 the intake answered with a problem (its type is
printed); 6 the intake could not be reached; 7 `--watch` gave up waiting; 8 a check of
`doctor` failed.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.live import Live

from gradeq.cli import assignments, budgets, render, reviews
from gradeq.cli.common import (
    CliError,
    JsonFlag,
    State,
    client_of,
    emit,
    new_idempotency_key,
    reported,
)
from gradeq.cli.config import resolve
from gradeq.cli.doctor import DOCTOR_FAILED, Doctor
from gradeq.client import GradeqClient, Job

JOB_FAILED = 3
JOB_CANCELLED = 4
WATCH_TIMEOUT = 7
FINAL_EXIT = {"SUCCEEDED": 0, "FAILED": JOB_FAILED, "CANCELLED": JOB_CANCELLED}

app = typer.Typer(
    help="Submit grading jobs and operate a Gradeq queue.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
out = Console()
err = Console(stderr=True)


@app.callback()
def connect(
    ctx: typer.Context,
    url: Annotated[
        str | None, typer.Option(envvar="GRADEQ_URL", help="The intake's base URL.")
    ] = None,
    api_key: Annotated[
        str | None, typer.Option(envvar="GRADEQ_API_KEY", help="A client API key.")
    ] = None,
    operator_key: Annotated[
        str | None, typer.Option(envvar="GRADEQ_OPERATOR_KEY", help="An operator key.")
    ] = None,
    config: Annotated[
        Path | None, typer.Option(help="TOML file with url, api_key, operator_key.")
    ] = None,
    retries: Annotated[
        int,
        typer.Option(
            envvar="GRADEQ_RETRIES", min=0, help="Retries of an unreachable or busy intake."
        ),
    ] = 4,
) -> None:
    """Connect to an intake: flags first, then GRADEQ_* variables, then the config file."""
    target = resolve(url, api_key, operator_key, config)
    client = GradeqClient(
        target.url,
        target.api_key,
        operator_key=target.operator_key,
        max_attempts=retries + 1,
        backoff_s=0.5,
        max_backoff_s=8.0,
    )
    ctx.obj = State(client)


def _client(ctx: typer.Context) -> GradeqClient:
    return client_of(ctx)


def _emit(body: Any) -> None:
    emit(body)


def _read_body(source: str) -> dict[str, Any]:
    text = sys.stdin.read() if source == "-" else Path(source).read_text()
    try:
        body = json.loads(text)
    except ValueError as exc:
        raise CliError("invalid-input", f"{source} is not JSON: {exc}", 2) from exc
    if not isinstance(body, dict):
        raise CliError("invalid-input", f"{source} must hold a JSON object", 2)
    return body


@app.command()
@reported
def submit(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(help="A JSON grading request file, or - for stdin.")],
    idempotency_key: Annotated[
        str | None, typer.Option(help="Reuse this key (a retry); generated when absent.")
    ] = None,
    lane: Annotated[
        str | None, typer.Option(help="The priority lane (e.g. exam, grading, bulk).")
    ] = None,
    file: Annotated[
        list[Path] | None,
        typer.Option(
            "--file",
            help="A file of the answer (photo, PDF, text or a zip of sources); repeatable.",
            exists=True,
            dir_okay=False,
        ),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Submit a grading request; prints the Idempotency-Key so a retry can reuse it."""
    body = _read_body(source)
    if lane is not None:
        body["lane"] = lane
    key = idempotency_key or new_idempotency_key()
    if not as_json:
        err.print(f"Idempotency-Key: {key}")
    job = _client(ctx).submit(body, key, files=file or [])
    if as_json:
        _emit({"idempotency_key": key, "replayed": job.replayed, "job": job.data})
        return
    verb = "already submitted" if job.replayed else "submitted"
    where = f" in lane {job.data['lane']}" if job.data.get("lane") else ""
    out.print(f"{verb}: job [bold]{job.id}[/] is {job.status}{where}")


@app.command()
@reported
def status(
    ctx: typer.Context,
    job_id: str,
    watch: Annotated[bool, typer.Option(help="Follow the job until it is final.")] = False,
    timeout: Annotated[float, typer.Option(help="Give up watching after seconds.")] = 3600.0,
    as_json: JsonFlag = False,
) -> None:
    """Show a job; with --watch, follow it live, polling at the server's Retry-After."""
    client = _client(ctx)
    if watch and as_json:
        job = _follow(client, job_id, timeout, None)
    elif watch:
        with Live(console=out) as live:
            job = _follow(client, job_id, timeout, lambda j: live.update(render.job_panel(j.data)))
    else:
        job = client.get(job_id)
    if as_json:
        _emit(job.data)
    elif not watch:
        out.print(render.job_panel(job.data))
    code = FINAL_EXIT.get(job.status, 0)
    if code:
        error = job.data.get("error") or {}
        err.print(f"job {job.status}: {error.get('type', 'cancelled')}")
        raise typer.Exit(code)


def _follow(
    client: GradeqClient, job_id: str, timeout: float, show: Callable[[Job], None] | None
) -> Job:
    """Poll the job at the server's Retry-After until it is final or `timeout` runs out."""
    try:
        return client.wait(job_id, timeout, default_poll_s=1.0, on_update=show)
    except TimeoutError as exc:
        detail = f"job {job_id} not final after {timeout:g}s"
        raise CliError("watch-timeout", detail, WATCH_TIMEOUT) from exc


def _filters(
    client: str | None,
    assignment: str | None,
    since: str | None,
    until: str | None,
    limit: int,
    cursor: str | None,
) -> dict[str, Any]:
    """The query of an operator listing, in the admin API's parameter names."""
    return {
        "client": client,
        "assignment": assignment,
        "created_from": since,
        "created_to": until,
        "limit": limit,
        "cursor": cursor,
    }


def _listing(
    ctx: typer.Context, path: str, params: dict[str, Any], as_json: bool, title: str
) -> None:
    reply = _client(ctx).admin("GET", path, params=params)
    if as_json:
        _emit(reply.body)
        return
    out.print(render.jobs_table(reply.body["jobs"], title))
    if reply.body.get("next_cursor"):
        err.print(f"more: --cursor {reply.body['next_cursor']}")


Client = Annotated[str | None, typer.Option(help="Only this client's jobs.")]
Assignment = Annotated[str | None, typer.Option(help="Only this assignment's jobs.")]
Since = Annotated[str | None, typer.Option(help="Created at or after (ISO 8601).")]
Until = Annotated[str | None, typer.Option(help="Created before (ISO 8601).")]
Limit = Annotated[int, typer.Option(min=1, max=100, help="Jobs per page.")]
Cursor = Annotated[str | None, typer.Option(help="Continue a listing where it stopped.")]


@app.command("list")
@reported
def list_jobs(
    ctx: typer.Context,
    status: Annotated[str | None, typer.Option(help="Only jobs in this status.")] = None,
    client: Client = None,
    assignment: Assignment = None,
    since: Since = None,
    until: Until = None,
    limit: Limit = 20,
    cursor: Cursor = None,
    as_json: JsonFlag = False,
) -> None:
    """List jobs across clients, newest first (operator)."""
    params = _filters(client, assignment, since, until, limit, cursor)
    params["status"] = status.upper() if status else None
    _listing(ctx, "/jobs", params, as_json, "jobs")


@app.command()
@reported
def failed(
    ctx: typer.Context,
    client: Client = None,
    assignment: Assignment = None,
    since: Since = None,
    until: Until = None,
    limit: Limit = 20,
    cursor: Cursor = None,
    as_json: JsonFlag = False,
) -> None:
    """List the dead letters (FAILED jobs) with their last error (operator)."""
    params = _filters(client, assignment, since, until, limit, cursor)
    _listing(ctx, "/dead-letters", params, as_json, "failed jobs")


@app.command()
@reported
def replay(
    ctx: typer.Context,
    job_id: Annotated[str | None, typer.Argument(help="The failed job to replay.")] = None,
    all_failed: Annotated[
        bool, typer.Option("--all-failed", help="Replay the failed jobs that match.")
    ] = False,
    client: Client = None,
    assignment: Assignment = None,
    limit: Annotated[int, typer.Option(min=1, max=100, help="At most this many.")] = 100,
    as_json: JsonFlag = False,
) -> None:
    """Replay one failed job, or (--all-failed) a filtered batch (operator)."""
    api = _client(ctx)
    if all_failed == (job_id is not None):
        raise CliError("usage", "give a job id or --all-failed, not both or neither", 2)
    if all_failed:
        body = {"client": client, "assignment": assignment, "limit": limit}
        reply = api.admin("POST", "/dead-letters/replay", json=body)
        if as_json:
            _emit(reply.body)
        else:
            out.print(f"replayed {len(reply.body['replayed'])} job(s)")
            for skipped, reason in reply.body["skipped"].items():
                err.print(f"skipped {skipped}: {reason}")
        return
    # Name the generation that failed, so running this twice replays once: a job already
    # replayed names the generation its last replay started from.
    seen = api.admin("GET", f"/jobs/{job_id}").body
    generation = seen["generation"]
    if seen["status"] != "FAILED" and seen["replays"]:
        generation = seen["replays"][-1]["generation"] - 1
    reply = api.admin("POST", f"/jobs/{job_id}/replay", json={"generation": generation})
    if as_json:
        _emit(reply.body)
        return
    job = reply.body["job"]
    verb = "replayed" if reply.body["replayed"] else "already replayed"
    out.print(f"{verb}: job {job['id']} is {job['status']} (generation {job['generation']})")


@app.command()
@reported
def cancel(ctx: typer.Context, job_id: str, as_json: JsonFlag = False) -> None:
    """Cancel a job: as an operator when an operator key is set, else as its client."""
    api = _client(ctx)
    operator = api.has_operator_key
    job = api.admin("POST", f"/jobs/{job_id}/cancel").body if operator else api.cancel(job_id).data
    if as_json:
        _emit(job)
    else:
        out.print(f"job {job['id']} is {job['status']}")


@app.command()
@reported
def stats(
    ctx: typer.Context,
    window: Annotated[int, typer.Option(min=1, max=1440, help="Minutes to look back.")] = 60,
    as_json: JsonFlag = False,
) -> None:
    """Queue health: counts, oldest waiting job, timing percentiles, failures, throughput."""
    api = _client(ctx)
    reply = api.admin("GET", "/queue-health", params={"window_minutes": window})
    lanes = api.admin("GET", "/lanes", params={"window_minutes": window}).body["lanes"]
    if as_json:
        _emit({**reply.body, "lanes": lanes})
    else:
        render.print_all(out, *render.health_tables(reply.body), render.lanes_table(lanes))


@app.command()
@reported
def doctor(
    ctx: typer.Context,
    url: Annotated[
        str | None, typer.Option(help="The intake to check (default: the connection's).")
    ] = None,
    analytics_url: Annotated[
        str | None,
        typer.Option(help="An analytics service serving /v1/events (the local stack's)."),
    ] = None,
    timeout: Annotated[float, typer.Option(help="Give up waiting for a step after s.")] = 300.0,
    as_json: JsonFlag = False,
) -> None:
    """Check a deployment end to end: readiness, one job to its final state, its event."""
    client = _client(ctx)
    if url:
        client = client.at(url)
    analytics = client.at(analytics_url) if analytics_url else None
    report = Doctor(client, analytics, timeout).run()
    checks = [c.as_dict() for c in report.checks]
    if as_json:
        _emit({"url": client.base_url, "ok": report.ok, "checks": checks})
    else:
        out.print(render.doctor_table(checks, client.base_url))
    if not report.ok:
        raise typer.Exit(DOCTOR_FAILED)


lanes_app = typer.Typer(help="Priority lanes: figures, pause, resume, purge (operator).")
app.add_typer(lanes_app, name="lanes")
LaneName = Annotated[str, typer.Argument(help="The lane (a queue of queues.json).")]


@lanes_app.command("list")
@reported
def lanes_list(
    ctx: typer.Context,
    window: Annotated[int, typer.Option(min=1, max=1440, help="Minutes to look back.")] = 60,
    as_json: JsonFlag = False,
) -> None:
    """Each lane: paused or not, backlog, oldest job's age, queue wait p50/p99."""
    lanes = _client(ctx).admin("GET", "/lanes", params={"window_minutes": window}).body
    if as_json:
        _emit(lanes)
    else:
        out.print(render.lanes_table(lanes["lanes"]))


def _lane_state(ctx: typer.Context, lane: str, action: str, as_json: bool) -> None:
    reply = _client(ctx).admin("POST", f"/lanes/{lane}/{action}").body
    if as_json:
        _emit(reply)
    else:
        out.print(f"lane {reply['lane']} is {'paused' if reply['paused'] else 'running'}")


@lanes_app.command("pause")
@reported
def lanes_pause(ctx: typer.Context, lane: LaneName, as_json: JsonFlag = False) -> None:
    """Stop dispatching the lane's jobs; new jobs are still accepted."""
    _lane_state(ctx, lane, "pause", as_json)


@lanes_app.command("resume")
@reported
def lanes_resume(ctx: typer.Context, lane: LaneName, as_json: JsonFlag = False) -> None:
    """Dispatch the lane again: its backlog goes out at the lane's rate."""
    _lane_state(ctx, lane, "resume", as_json)


@lanes_app.command("purge")
@reported
def lanes_purge(
    ctx: typer.Context,
    lane: LaneName,
    reason: Annotated[str, typer.Option(help="Why, recorded on every cancelled job.")] = "",
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Delete the lane's tasks and cancel its jobs not yet final (with their events)."""
    if not yes and not typer.confirm(f"Cancel every job of lane {lane} not yet final?"):
        raise CliError("usage", "purge not confirmed", 2)
    reply = _client(ctx).admin("POST", f"/lanes/{lane}/purge", json={"reason": reason}).body
    if as_json:
        _emit(reply)
        return
    out.print(f"lane {lane} purged: {len(reply['cancelled'])} job(s) cancelled")
    for skipped, why in reply["skipped"].items():
        err.print(f"skipped {skipped}: {why}")


app.add_typer(assignments.app, name="assignments")
app.add_typer(budgets.app, name="budgets")
app.add_typer(reviews.app, name="reviews")
app.add_typer(reviews.erase_app, name="erase")


def main() -> None:
    app()
