"""How the ``turnkit`` command shows a turn: compact tool calls, outcomes, and held writes."""

from __future__ import annotations

import json
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.padding import Padding
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from turnkit.executor.answers import (
    Answer,
    DryRun,
    Held,
    Ran,
    Refused,
    Rejected,
    Unreadable,
    answer_from_json,
    shown_outcome,
)
from turnkit.ledger.records import Confirmation, iso
from turnkit.turn.keys import thread_of

WIDTH = 160


def compact(value: Any, limit: int = WIDTH) -> str:
    """One line of JSON, cut to ``limit`` characters."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def tool_call(console: Console, name: str, args: Any) -> None:
    """A tool call the model made, in one line."""
    console.print(f"  [cyan]→ {escape(name)}[/] {escape(compact(args))}", highlight=False)


def outcome(console: Console, content: Any) -> None:
    """A tool's answer as the model received it (a tool message's JSON text), in one line."""
    try:
        value = json.loads(content) if isinstance(content, str) else content
    except ValueError:
        value = content
    console.print("  " + _received(value), markup=True, highlight=False)


def answer(console: Console, answer: Answer) -> None:
    """An executor answer (a decision's outcome), in one line."""
    console.print("  " + _answer(answer), markup=True, highlight=False)


def _received(value: Any) -> str:
    """What a model received: a held call's notice (``turn.tools.held_result``), a result cut
    to fit (``turn.tools.fit``), or an answer's JSON."""
    match value:
        case {"status": "confirmation_required", "confirmation_id": str()} if len(value) == 2:
            return "[yellow]← waits for your confirmation[/]"
        case {"truncated": True, "partial": partial}:
            return f"[green]← ok[/] (truncated): {_e(partial)}"
    try:
        return _answer(answer_from_json(value))
    except ValueError:
        return f"← {_e(value)}"


def _answer(answer: Answer) -> str:
    match answer:
        case Refused(code=code, message=message):
            return f"[red]← {escape(code)}[/]: {_e(message)}"
        case Held():
            return "[yellow]← waits for your confirmation[/]"
        case Rejected(message=message):
            return f"[yellow]← rejected[/]: {_e(message)}"
        case Ran(result=result):
            return f"[green]← ok[/]: {_e(result)}"
        case DryRun():
            return f"← {_e(answer.to_json())}"


def held(console: Console, entry: dict[str, Any]) -> None:
    """A write waiting for a decision: tool, title, the exact arguments, expiry."""
    arguments = json.dumps(entry["arguments"], indent=2, ensure_ascii=False)
    title = escape(f"{entry['title']} ({entry['tool']}) waits for your decision")
    body = Syntax(arguments, "json", theme="ansi_dark", word_wrap=True)
    console.print(Panel(body, title=title, border_style="yellow"))
    console.print(
        f"  confirmation {escape(entry['confirmation_id'])} · expires {escape(entry['expires_at'])}"
    )
    preview = entry.get("preview") or {}
    if "unavailable" in preview:
        console.print(f"  [dim]preview unavailable: {escape(str(preview['unavailable']))}[/]")
    elif "value" in preview:
        shown = compact(preview["value"], 400)
        cut = " (cut)" if preview.get("truncated") else ""
        console.print(f"  [cyan]what it would change:[/] {escape(str(shown))}{cut}")
    approvals = entry.get("approvals")
    if approvals and approvals.get("needed", 1) > 1:
        console.print(f"  needs {approvals['needed']} approvals ({approvals['given']} given)")
    if entry.get("problem"):
        console.print(f"  [red]not applied last time:[/] {escape(entry['problem'])}")


def _e(value: Any) -> str:
    return escape(compact(value))


def tools_table(rows: list[dict[str, str]], title: str) -> Table:
    """The table of ``turnkit tools``."""
    table = Table(title=title, title_justify="left")
    for column in ("name", "model name"):
        table.add_column(column, no_wrap=True)
    for column in ("kind", "scope", "needs confirmation"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(row[c] for c in ("name", "model", "kind", "scope", "confirm")))
    return table


def status(confirmation: Confirmation, now: float) -> str:
    """Where a confirmation is, in words: pending, expired, approved (and how it went), ..."""
    c = confirmation
    if c.status == "pending":
        return "pending" if c.expires_at > now else "expired (not yet closed)"
    if c.status == "running":
        return "approved: running"
    if c.status in ("rejected", "expired"):
        return c.status
    outcome = shown_outcome(c)
    if isinstance(outcome, Unreadable):
        return f"{c.status}: outcome unreadable"
    if c.status == "forbidden":  # closed with its key: nothing ran
        reason = outcome.details.get("reason") if isinstance(outcome, Refused) else None
        return f"forbidden ({reason})" if reason else "forbidden"
    if isinstance(outcome, Ran):
        return "approved: ok"
    code = outcome.code if isinstance(outcome, Refused) else "?"
    return "outcome unknown" if code == "outcome_unknown" else f"approved: {code}"


def decided(confirmation: Confirmation) -> str:
    """One line: who decided what, when, and the outcome (``decided(...)`` of a closed one)."""
    c = confirmation
    action = (c.decision or {}).get("action") or c.status
    verb = {"approve": "approved", "reject": "rejected", "edit": "edited and approved"}.get(
        action, action
    )
    who = f" by {c.decided_by}" if c.decided_by else ""
    when = f" at {iso(c.decided_at)}" if c.decided_at else ""
    result: str
    match shown_outcome(c):
        case Refused(code=code):
            result = code
        case None:
            result = "running"
        case Unreadable():
            result = "outcome unreadable"
        case outcome:
            result = outcome.status
    return f"{c.id}: {c.tool} {verb}{who}{when} ({result})"


COLUMNS = ("id", "tool", "caller", "thread", "created", "status", "expires")
"""The columns of the confirmations table shown whole, before the arguments."""
ARGUMENTS_WIDTH = 24
"""The least width the arguments get in the table; narrower, one block per confirmation."""


def confirmations(console: Console, rows: list[Confirmation], now: float) -> None:
    """``turnkit confirmations list``: a table when its columns fit the terminal whole, else one
    block per confirmation. Either way an id is never wrapped or cut (copy it whole)."""
    cells = [_cells(c, now) for c in rows]
    widths = [max(cell_len(cell) for cell in (title, *(r[i] for r in cells)))
              for i, title in enumerate(COLUMNS)]  # fmt: skip
    borders = 3 * (len(COLUMNS) + 1) + 1  # a padded cell each side of every rule
    if sum(widths) + ARGUMENTS_WIDTH + borders <= console.width:
        console.print(_table(rows, cells))
        return
    console.print(f"{len(rows)} confirmation(s):")
    for c, (cid, tool, caller, thread, created, shown, expires) in zip(rows, cells, strict=True):
        console.print(f"\n[bold]{escape(cid)}[/] · {escape(shown)}", soft_wrap=True)
        for line in (
            f"{tool} for {caller} · thread {thread}",
            f"created {created} · expires {expires}",
            f"arguments {compact(c.input, 400)}",
        ):
            console.print(Padding(Text(line, overflow="fold"), (0, 0, 0, 2), expand=False))


def _cells(c: Confirmation, now: float) -> tuple[str, ...]:
    thread = c.thread_id or thread_of(c.idempotency_key) or "-"
    return (c.id, c.tool, c.caller.identity, thread, iso(c.created_at), status(c, now),
            c.expires_at_iso)  # fmt: skip


def _table(rows: list[Confirmation], cells: list[tuple[str, ...]]) -> Table:
    table = Table(title="confirmations", title_justify="left")
    for column in COLUMNS:
        table.add_column(column, no_wrap=True)  # they fit: measured by ``confirmations``
    table.add_column("arguments", overflow="fold", min_width=ARGUMENTS_WIDTH)
    for c, row in zip(rows, cells, strict=True):
        table.add_row(*row, compact(c.input, 60))
    return table


def confirmation_json(c: Confirmation, now: float) -> dict[str, Any]:
    """A confirmation as ``--json`` prints it."""
    return {
        "id": c.id,
        "tool": c.tool,
        "caller": c.caller.identity,
        "thread": c.thread_id or thread_of(c.idempotency_key),
        "created_at": iso(c.created_at),
        "expires_at": c.expires_at_iso,
        "status": c.status,
        "shown_as": status(c, now),
        "decided_by": c.decided_by,
        "decided_at": iso(c.decided_at) if c.decided_at else None,
        "decision": c.decision,
        "arguments": c.input,
        "outcome": c.outcome,
    }
