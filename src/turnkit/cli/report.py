"""``turnkit report approvals``: what people decided about held writes, per tool.

The figures are ``turnkit.ledger.report.approval_report``'s (the inbox's ``/ui/report`` shows the
same): held, the approve / edit / reject / expired rates among the decided ones, the wait from the
hold to a person's decision (p50, p90), and a line per tool people approved unedited many times in
a row, suggesting a ``danger`` rule. It reads the ledger only (no module is loaded).
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from turnkit.cli.options import (
    HELP_MARKUP,
    PERIODS,
    USAGE,
    Db,
    HelpGroup,
    console,
    period_seconds,
    records,
)
from turnkit.ledger.records import iso
from turnkit.ledger.report import (
    STREAK_OVER,
    ToolReport,
    approval_report,
    duration_text,
    percent_text,
)

app = typer.Typer(
    help="What people decided about held writes.",
    no_args_is_help=True,
    rich_markup_mode=HELP_MARKUP,
    cls=HelpGroup,
)


@app.command()
def approvals(
    db: Db = None,
    since: Annotated[
        str | None,
        typer.Option(help=f"Only writes held in this last period: {PERIODS}; default all."),
    ] = None,
    streak: Annotated[
        int,
        typer.Option(min=1, help="Plain approvals in a row from which a tool gets a suggestion."),
    ] = STREAK_OVER,
    as_json: Annotated[bool, typer.Option("--json", help="The figures as JSON.")] = False,
) -> None:
    """Per tool: held, approve / edit / reject / expired rates, wait p50 and p90, and where a
    `danger` rule could let calls through that people always approve."""
    seconds = None if since is None else _seconds(since)
    opened = records(db)
    try:
        now = opened.executor.clock()
        start = None if seconds is None else now - seconds
        found = approval_report(opened.storage.ledger, now=now, since=start, streak_over=streak)
    finally:
        opened.close()
    if as_json:
        body = {"since": None if start is None else iso(start), "now": iso(now),
                "tools": [row.as_dict() for row in found]}  # fmt: skip
        typer.echo(json.dumps(body, indent=2))
        return
    period = "" if start is None else f" since {iso(start)}"
    if not found:
        console.print(f"no confirmations yet{period}: nothing was held for a person")
        return
    console.print(table(found, f"held writes{period}"))
    for row in found:
        if row.suggestion:
            console.print(f"[yellow]suggestion:[/] {escape(row.suggestion)}")


COLUMNS = ("tool", "held", "approve", "edit", "reject", "expired", "p50", "p90")
"""The table's columns (rates are shares of the decided ones; p50 and p90 are waits)."""


def table(rows: list[ToolReport], title: str) -> Table:
    """The table of ``turnkit report approvals``; a forbidden column when a key closed some."""
    forbidden = any(row.forbidden for row in rows)
    shown = Table(title=title, title_justify="left")
    shown.add_column("tool", overflow="fold")
    for column in (*COLUMNS[1:6], *(("forbidden",) if forbidden else ()), *COLUMNS[6:]):
        shown.add_column(column, justify="right", no_wrap=True)
    for row in rows:
        rates = [percent_text(row.rate(o)) for o in ("approved", "edited", "rejected", "expired")]
        if forbidden:
            rates.append(percent_text(row.rate("forbidden")))
        pending = f" ({row.pending} pending)" if row.pending else ""
        shown.add_row(row.tool, f"{row.held}{pending}", *rates,
                      duration_text(row.wait_p50), duration_text(row.wait_p90))  # fmt: skip
    return shown


def _seconds(text: str) -> float:
    """``--since``: a whole number and a unit (``7d``); a typo ends the command (``USAGE``)."""
    seconds = period_seconds(text)
    if seconds is None:
        console.print(
            f"[red]--since {text!r} is not a period[/]: give a whole number and a unit, e.g."
            f" {PERIODS} (leave it out for everything)"
        )
        raise typer.Exit(USAGE)
    return seconds
