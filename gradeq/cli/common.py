"""What every `gradeq` command shares: the client, errors as exit codes, JSON output."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import Annotated, Any, ParamSpec, TypeVar

import typer
from rich.console import Console

from gradeq.client import GradeqClient, GradeqError, MissingKey, Unreachable

P = ParamSpec("P")
R = TypeVar("R")

JsonFlag = Annotated[bool, typer.Option("--json", help="Print the answer as JSON.")]
err = Console(stderr=True)


class CliError(Exception):
    """A failure the CLI reports with a problem type and an exit code."""

    def __init__(self, problem_type: str, detail: str, exit_code: int) -> None:
        super().__init__(detail)
        self.problem_type = problem_type
        self.detail = detail
        self.exit_code = exit_code


def cli_error(exc: GradeqError | Unreachable | MissingKey) -> CliError:
    """What the client raised, as the problem type and exit code the CLI documents."""
    if isinstance(exc, GradeqError):
        return CliError(exc.slug, exc.detail, 5)
    if isinstance(exc, Unreachable):
        return CliError("unreachable", str(exc), 6)
    name = "operator key (--operator-key, GRADEQ_OPERATOR_KEY)"
    if not exc.operator:
        name = "API key (--api-key, GRADEQ_API_KEY)"
    return CliError("missing-credential", f"this command needs an {name}", 2)


def new_idempotency_key() -> str:
    return f"cli-{uuid.uuid4()}"


@dataclass
class State:
    client: GradeqClient


def reported(command: Callable[P, R]) -> Callable[P, R]:
    """Turn a failure into its message (or JSON) and its exit code."""

    @wraps(command)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            try:
                return command(*args, **kwargs)
            except (GradeqError, Unreachable, MissingKey) as exc:
                raise cli_error(exc) from exc
        except CliError as exc:
            if kwargs.get("as_json"):
                emit({"error": {"type": exc.problem_type, "detail": exc.detail}})
            else:
                err.print(f"[red]error[/] {exc.problem_type}: {exc.detail}")
            raise typer.Exit(exc.exit_code) from exc

    return run


def client_of(ctx: typer.Context) -> GradeqClient:
    state: State = ctx.obj
    return state.client


def emit(body: Any) -> None:
    # Plain JSON on one line: a script parses it, so no wrapping or colour.
    typer.echo(json.dumps(body))
