"""`gradeq assignments ...`: create, read, submit a class's answers, grades, regrade, watch."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from gradeq.cli.common import CliError, JsonFlag, client_of, emit, new_idempotency_key, reported
from gradeq.cli.render import id_column, text_column

app = typer.Typer(help="Assignments: one rubric, a class's answers, one grade sheet.")
out = Console()
err = Console(stderr=True)
WATCH_TIMEOUT = 7


def _read(source: str) -> Any:
    text = sys.stdin.read() if source == "-" else Path(source).read_text()
    try:
        return json.loads(text)
    except ValueError:
        # JSON lines: one answer an object a line.
        try:
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        except ValueError as exc:
            raise CliError("invalid-input", f"{source} is not JSON or JSON lines", 2) from exc


def _summary(assignment: dict[str, Any]) -> Table:
    table = Table(show_header=False, box=None, title=f"assignment {assignment['id']}")
    table.add_row("title", assignment["title"])
    table.add_row("rubric version", str(assignment["rubric"]["version"]))
    table.add_row("prompt version", assignment["prompt_version"])
    progress = assignment.get("progress")
    if progress:
        table.add_row("round", str(progress["round"]))
        table.add_row("final", f"{progress['final']} of {progress['submissions']}")
        mean = progress["mean_score"]
        table.add_row("mean score", "-" if mean is None else f"{mean:.2f}")
        counts = ", ".join(f"{k} {v}" for k, v in progress["counts"].items() if v)
        table.add_row("by status", counts or "-")
    return table


@app.command()
@reported
def create(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(help="A JSON assignment file, or - for stdin.")],
    idempotency_key: Annotated[
        str | None, typer.Option(help="Reuse this key (a retry); generated when absent.")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Create an assignment (title, rubric, max_score, prompt_version)."""
    body = _read(source)
    if not isinstance(body, dict):
        raise CliError("invalid-input", f"{source} must hold a JSON object", 2)
    key = idempotency_key or new_idempotency_key()
    assignment = client_of(ctx).create_assignment(body, key)
    if as_json:
        emit(assignment)
    else:
        out.print(f"assignment [bold]{assignment['id']}[/] created (Idempotency-Key {key})")


@app.command()
@reported
def get(ctx: typer.Context, assignment_id: str, as_json: JsonFlag = False) -> None:
    """Show an assignment and its progress."""
    body = client_of(ctx).assignment(assignment_id).body
    if as_json:
        emit(body)
    else:
        out.print(_summary(body))


@app.command("list")
@reported
def list_assignments(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """List your assignments, newest first."""
    found = list(client_of(ctx).assignments())
    if as_json:
        emit(found)
        return
    table = Table(id_column("id"), *map(text_column, ("title", "rubric version", "created")))
    for a in found:
        table.add_row(a["id"], a["title"], str(a["rubric"]["version"]), a["created_at"])
    out.print(table)


@app.command("submit-batch")
@reported
def submit_batch(
    ctx: typer.Context,
    assignment_id: str,
    source: Annotated[str, typer.Argument(help="JSON list or JSON lines of answers, or -.")],
    as_json: JsonFlag = False,
) -> None:
    """Submit answers (each with a submission_id); sending again completes a cut-off batch."""
    answers = _read(source)
    if isinstance(answers, dict):
        answers = answers.get("answers")
    if not isinstance(answers, list):
        raise CliError("invalid-input", f"{source} must hold a list of answers", 2)
    result = client_of(ctx).submit_batch(assignment_id, answers)
    if as_json:
        emit(result)
        return
    out.print(
        f"accepted {result['accepted']}, already there {result['existing']},"
        f" refused {result['refused']}"
    )
    for item in result["items"]:
        if item["status"] == "refused":
            problem = item["problem"]
            err.print(f"[red]refused[/] {item['submission_id']}: {problem['detail']}")


@app.command()
@reported
def grades(
    ctx: typer.Context,
    assignment_id: str,
    csv: Annotated[bool, typer.Option("--csv", help="The grade sheet as CSV.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """The grades: a table, JSON lines of jobs, or the CSV sheet (streamed)."""
    client = client_of(ctx)
    if csv:
        for line in client.grades_csv(assignment_id):
            typer.echo(line)
        return
    if as_json:
        for job in client.grades(assignment_id):
            emit(job.data)
        return
    # The final grade (the teacher's where one decided, else the model's; the status while
    # there is none) and whose it is.
    table = Table(*map(text_column, ("submission", "final", "by")), id_column("job"))
    for row in client.grade_sheet(assignment_id):
        final = row["final_score"]
        table.add_row(
            row["submission_id"],
            row["status"] if final is None else _score(final),
            row["final_source"] or "-",
            row["job_id"],
        )
    out.print(table)


@app.command()
@reported
def post(
    ctx: typer.Context,
    assignment_id: str,
    submission: Annotated[
        list[str] | None,
        typer.Option("--submission", help="Post only this submission's grade (repeatable)."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Post the final grades to students and downstream systems (an assignment that posts
    manually); each changed grade becomes a new posted version."""
    body = client_of(ctx).post_grades(assignment_id, submission or None)
    if as_json:
        emit(body)
        return
    out.print(
        f"posted {len(body['posted'])}, already posted {len(body['unchanged'])},"
        f" not ready {len(body['not_ready'])}"
    )
    for submission_id in body["not_ready"]:
        err.print(f"not ready: {submission_id} (not graded, or held for a first review)")


@app.command()
@reported
def regrade(
    ctx: typer.Context,
    assignment_id: str,
    rubric: Annotated[
        str | None, typer.Option(help="A file with the new rubric (text, or a JSON list).")
    ] = None,
    prompt_version: Annotated[str | None, typer.Option(help="Grade with this prompt.")] = None,
    report: Annotated[bool, typer.Option(help="Show the report of the last regrade.")] = False,
    threshold: Annotated[float, typer.Option(help="A changed score moves more.")] = 1.0,
    reopen_reviewed: Annotated[
        bool,
        typer.Option(
            "--reopen-reviewed",
            help="Put the grades teachers reviewed back in their queue (they stay final).",
        ),
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Grade every final submission again in a new round; --report compares, per student,
    the final grade (the teacher's where one decided) and the model's before and after."""
    client = client_of(ctx)
    if report:
        body = client.regrade_report(assignment_id, threshold)
        if as_json:
            emit(body)
            return
        kappa = body["kappa"]
        shift = body["mean_shift"]
        out.print(
            f"round {body['round']}: {body['compared']} compared,"
            f" mean shift {'-' if shift is None else f'{shift:+.2f}'},"
            f" {body['changed']} moved more than {body['threshold']:g},"
            f" kappa {'-' if kappa is None else f'{kappa:.3f}'},"
            f" {body.get('flagged', 0)} back in the teacher's queue"
        )
        out.print(_changes_table(body["changes"]))
        return
    new_rubric: str | list[str] | None = None
    if rubric is not None:
        text = Path(rubric).read_text()
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = text
        new_rubric = parsed if isinstance(parsed, list) else text
    body = client.regrade(assignment_id, new_rubric, prompt_version, reopen_reviewed)
    if as_json:
        emit(body)
    else:
        # The regrade's answer is the assignment without progress: the round is read back.
        progress = client.assignment(assignment_id).body["progress"]
        out.print(f"regrade started: round {progress['round']}; watch it with `watch`")


@app.command()
@reported
def watch(
    ctx: typer.Context,
    assignment_id: str,
    timeout: Annotated[float, typer.Option(help="Give up watching after seconds.")] = 86400.0,
    as_json: JsonFlag = False,
) -> None:
    """Follow the current round with a live progress bar until every submission is final."""
    client = client_of(ctx)
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("mean {task.fields[mean]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=err, disable=as_json) as bar:
        task = bar.add_task(assignment_id, total=None, mean="-")

        def show(body: dict[str, Any]) -> None:
            progress = body.get("progress") or {}
            mean = progress.get("mean_score")
            bar.update(
                task,
                total=progress.get("submissions") or None,
                completed=progress.get("final", 0),
                mean="-" if mean is None else f"{mean:.2f}",
            )

        try:
            body = client.wait_assignment(assignment_id, timeout, on_update=show)
        except TimeoutError as exc:
            detail = f"assignment {assignment_id} not graded after {timeout:g}s"
            raise CliError("watch-timeout", detail, WATCH_TIMEOUT) from exc
    if as_json:
        emit(body)
    else:
        out.print(_summary(body))


def _figure(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


@app.command()
@reported
def agreement(ctx: typer.Context, assignment_id: str, as_json: JsonFlag = False) -> None:
    """Model against teacher on the reviewed grades (needs an operator key)."""
    body = client_of(ctx).admin("GET", f"/assignments/{assignment_id}/agreement").body
    if as_json:
        emit(body)
        return
    table = Table("model", "prompt", "reviewed", "exact match", "mean abs. diff.", "kappa")
    rows = [*body["by_model"], {**body, "model": "all", "prompt_version": ""}]
    for row in rows:
        table.add_row(
            row["model"] or "(offline)",
            row["prompt_version"] or "",
            str(row["reviewed"]),
            _figure(row["exact_match_rate"]),
            _figure(row["mean_absolute_difference"]),
            _figure(row["quadratic_weighted_kappa"], 3),
        )
    out.print(table)


def _score(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _changes_table(changes: list[dict[str, Any]]) -> Table:
    """Per submission of the regraded round: the final grade before and after (what the
    student sees), its change and source, and the model's grades before -> after; the
    student's id first when the submissions name one."""
    students = any(c.get("student_id") for c in changes)
    columns = ("submission", "old", "new", "change", "source", "model", "status")
    table = Table(*map(text_column, (("student",) if students else ()) + columns))
    for change in changes:
        old, new = change["old"], change["new"]
        moved = "-" if old is None or new is None else f"{new - old:+g}"
        model = f"{_score(change.get('old_model'))}->{_score(change.get('new_model'))}"
        cells = [
            change["submission_id"],
            _score(old),
            _score(new),
            moved,
            change.get("source") or "model",
            model,
            change["status"] + (" flagged" if change.get("flagged") else ""),
        ]
        table.add_row(*([change.get("student_id") or "-"] if students else []), *cells)
    return table
