"""`gradeq reviews ...` (with a reviewer key as the API key) and `gradeq erase ...`."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from gradeq.cli.common import JsonFlag, client_of, emit, reported
from gradeq.cli.render import id_column, text_column

app = typer.Typer(
    help="Held grades: the review queue, one grade, accept or override; regrade requests."
)
erase_app = typer.Typer(help="Erase a submission or everything of one student.")
out = Console()


@app.command("list")
@reported
def list_held(
    ctx: typer.Context,
    assignment_id: Annotated[str | None, typer.Option(help="Only this assignment.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Grades held for review, oldest first."""
    found = list(client_of(ctx).held_grades(assignment_id))
    if as_json:
        emit(found)
        return
    table = Table(
        id_column("job"),
        *map(text_column, ("submission", "held at", "reasons", "model score", "release")),
    )
    for r in found:
        score = "-" if r["model_score"] is None else f"{r['model_score']:g}/{r['max_score']:g}"
        table.add_row(
            r["job_id"],
            r["submission_id"],
            r["held_at"],
            ", ".join(r["reasons"]),
            score,
            r["release"],
        )
    out.print(table)


@app.command()
@reported
def show(ctx: typer.Context, job_id: str, as_json: JsonFlag = False) -> None:
    """One held grade: answer, rubric, the model's grade and the reviews."""
    body = client_of(ctx).held_grade(job_id)
    if as_json:
        emit(body)
        return
    model = body["model_result"]
    out.print(f"[bold]{body['submission_id']}[/] ({body['status']}: {', '.join(body['reasons'])})")
    request = body.get("regrade_request")
    if request:
        answered = f"answered {request['answer']}" if request["answer"] else "open"
        out.print(f"regrade request ({answered}): {request['reason']}", markup=False)
    out.print(body["answer"], markup=False)
    for file in body.get("attachments", []):
        out.print(f"file {file['index']}: {file['name']} ({file['content_type']})", markup=False)
    out.print(
        f"model: {model['score']:g}/{model['max_score']:g}  {model['feedback']}", markup=False
    )
    for review in body["reviews"]:
        out.print(
            f"review {review['number']} by {review['by']} at {review['at']}: "
            f"{review['decision']} -> {review['result']['score']:g} ({review['reason']})",
            markup=False,
        )


@app.command()
@reported
def accept(ctx: typer.Context, job_id: str, reason: str = "", as_json: JsonFlag = False) -> None:
    """Accept the model's grade."""
    _done(client_of(ctx).review(job_id, reason), as_json)


@app.command()
@reported
def override(
    ctx: typer.Context,
    job_id: str,
    score: Annotated[float, typer.Option(help="The teacher's score.")],
    reason: Annotated[str, typer.Option(help="Why the model's grade was wrong.")],
    feedback: Annotated[str | None, typer.Option(help="Feedback for the student.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Replace the model's score (and feedback) with the teacher's, with a reason."""
    _done(client_of(ctx).review(job_id, reason, score=score, feedback=feedback), as_json)


@app.command()
@reported
def answer(
    ctx: typer.Context,
    job_id: str,
    reason: Annotated[str, typer.Option(help="Why, for the student.")],
    score: Annotated[
        float | None, typer.Option(help="The new score: change the grade (omit to keep it).")
    ] = None,
    feedback: Annotated[str | None, typer.Option(help="Feedback for the student.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Answer a student's regrade request: keep the grade, or change it (--score)."""
    body = client_of(ctx).answer_regrade_request(job_id, reason, score=score, feedback=feedback)
    _done(body, as_json)


@app.command("request")
@reported
def request_regrade(
    ctx: typer.Context,
    job_id: str,
    reason: Annotated[str, typer.Option(help="Why the grade should be looked at again.")],
    as_json: JsonFlag = False,
) -> None:
    """Ask for a regrade of your grade, once, with a reason (a student's credential)."""
    body = client_of(ctx).request_regrade(job_id, reason)
    if as_json:
        emit(body)
    else:
        out.print(f"job {body['id']}: regrade requested")


def _done(body: dict[str, Any], as_json: bool) -> None:
    if as_json:
        emit(body)
    else:
        out.print(f"job {body['job_id']} now scores {body['result']['score']:g}")


@erase_app.command("job")
@reported
def erase_job(ctx: typer.Context, job_id: str, as_json: JsonFlag = False) -> None:
    """Erase one submission."""
    _erased(client_of(ctx).erase(job_id), as_json)


@erase_app.command("student")
@reported
def erase_student(ctx: typer.Context, student_id: str, as_json: JsonFlag = False) -> None:
    """Erase everything of one student (by the student_id set on submission)."""
    _erased(client_of(ctx).erase_student(student_id), as_json)


def _erased(body: dict[str, Any], as_json: bool) -> None:
    if as_json:
        emit(body)
        return
    removed = body["removed"]
    out.print(
        f"removed {len(removed['jobs'])} job(s), {removed['reviews']} review(s), "
        f"{len(removed['uploads'])} upload(s), {removed['event_records']} event record(s)"
    )
    for remains in body["remains"]:
        out.print(f"remains in {remains['where']}: {remains['what']} (until {remains['until']})")
        if remains.get("statement"):
            out.print(remains["statement"], markup=False)
