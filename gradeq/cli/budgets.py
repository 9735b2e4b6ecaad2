"""`gradeq budgets ...`: monthly budgets per client and per assignment, and the spend
(operator). Amounts are typed and shown in dollars; the API keeps micro-dollars."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from gradeq.cli.common import CliError, JsonFlag, client_of, emit, reported

app = typer.Typer(help="Monthly budgets per client and per assignment, and the spend (operator).")
out = Console()

Scope = Annotated[str, typer.Argument(help="client or assignment.")]
Key = Annotated[str, typer.Argument(help="The client id or the assignment id.")]


def dollars(micros: int | None) -> str:
    return "-" if micros is None else f"${Decimal(micros) / 1_000_000:,.2f}"


def _micros(text: str, name: str) -> int:
    try:
        amount = Decimal(text.removeprefix("$"))
    except InvalidOperation:
        raise CliError(
            "usage", f"{name}: expected an amount of dollars, e.g. 250 or 12.50", 2
        ) from None
    if amount < 0:
        raise CliError("usage", f"{name}: a budget is not negative", 2)
    return int(amount * 1_000_000)


def _state(budget: dict[str, Any]) -> str:
    if budget["exhausted"]:
        return "spent: work held"
    return "past soft limit" if budget["past_soft"] else "ok"


def budgets_table(body: dict[str, Any]) -> Table:
    table = Table(title=f"budgets, {body['month']}")
    for column in ("budget", "spent", "soft", "hard", "state"):
        table.add_column(column)
    for budget in body["budgets"]:
        table.add_row(
            f"{budget['scope']} {budget['key']}",
            dollars(budget["spent_micro_usd"]),
            dollars(budget["soft_micro_usd"]),
            dollars(budget["hard_micro_usd"]),
            _state(budget),
        )
    return table


@app.command("list")
@reported
def list_budgets(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """Every budget with this month's spend against it."""
    body = client_of(ctx).admin("GET", "/budgets").body
    if as_json:
        emit(body)
    else:
        out.print(budgets_table(body))


@app.command("set")
@reported
def set_budget(
    ctx: typer.Context,
    scope: Scope,
    key: Key,
    hard: Annotated[str, typer.Option(help="Dollars a month; at it, work is held.")],
    soft: Annotated[
        str | None, typer.Option(help="Dollars a month past which an alert fires.")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Set or raise a budget (a raise releases held work within minutes)."""
    body: dict[str, Any] = {"hard_micro_usd": _micros(hard, "--hard")}
    if soft is not None:
        body["soft_micro_usd"] = _micros(soft, "--soft")
    budget = client_of(ctx).admin("PUT", f"/budgets/{scope}/{key}", json=body).body
    if as_json:
        emit(budget)
    else:
        out.print(
            f"{scope} {key}: {dollars(budget['spent_micro_usd'])} spent of "
            f"{dollars(budget['hard_micro_usd'])} in {budget['month']} ({_state(budget)})"
        )


@app.command("remove")
@reported
def remove_budget(ctx: typer.Context, scope: Scope, key: Key) -> None:
    """Remove a budget: its client's or assignment's work is no longer held."""
    client_of(ctx).admin("DELETE", f"/budgets/{scope}/{key}")
    out.print(f"{scope} budget of {key} removed")


@app.command("spend")
@reported
def spend(
    ctx: typer.Context,
    month: Annotated[str | None, typer.Option(help="YYYY-MM (default: this month).")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Each client's spend of the month, in total and on its busiest day."""
    params = {"month": month} if month else {}
    body = client_of(ctx).admin("GET", "/spend", params=params).body
    if as_json:
        emit(body)
        return
    table = Table(title=f"spend, {body['month']}")
    for column in ("client", "spent", "days", "busiest day"):
        table.add_column(column)
    for client, row in body["by_client"].items():
        busiest = max(row["days"].items(), key=lambda item: item[1])
        table.add_row(
            client,
            dollars(row["total_micro_usd"]),
            str(len(row["days"])),
            f"{busiest[0]} {dollars(busiest[1])}",
        )
    out.print(table)
