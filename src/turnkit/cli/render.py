"""How the ``turnkit`` command shows a turn: compact tool calls, outcomes, and held writes."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table

WIDTH = 160


def compact(value: Any, limit: int = WIDTH) -> str:
    """One line of JSON, cut to ``limit`` characters."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def tool_call(console: Console, name: str, args: Any) -> None:
    """A tool call the model made, in one line."""
    console.print(f"  [cyan]→ {escape(name)}[/] {escape(compact(args))}", highlight=False)


def outcome(console: Console, content: Any) -> None:
    """A tool's answer as the model received it, in one line."""
    try:
        answer = json.loads(content) if isinstance(content, str) else content
    except ValueError:
        answer = content
    if isinstance(answer, dict) and answer.get("status") == "error":
        error = answer.get("error") or {}
        text = f"[red]← {escape(str(error.get('code')))}[/]: {_e(error.get('message', ''))}"
    elif isinstance(answer, dict) and answer.get("status") == "confirmation_required":
        text = "[yellow]← waits for your confirmation[/]"
    elif isinstance(answer, dict) and answer.get("status") == "rejected":
        text = f"[yellow]← rejected[/]: {_e(answer.get('message', ''))}"
    elif isinstance(answer, dict) and answer.get("truncated"):
        text = f"[green]← ok[/] (truncated): {_e(answer.get('partial', ''))}"
    elif isinstance(answer, dict) and "result" in answer:
        text = f"[green]← ok[/]: {_e(answer['result'])}"
    else:
        text = f"← {_e(answer)}"
    console.print("  " + text, markup=True, highlight=False)


def held(console: Console, entry: dict[str, Any]) -> None:
    """A write waiting for a decision: tool, title, the exact arguments, expiry."""
    arguments = json.dumps(entry["arguments"], indent=2, ensure_ascii=False)
    title = escape(f"{entry['title']} ({entry['tool']}) waits for your decision")
    body = Syntax(arguments, "json", theme="ansi_dark", word_wrap=True)
    console.print(Panel(body, title=title, border_style="yellow"))
    console.print(
        f"  confirmation {escape(entry['confirmation_id'])} · expires {escape(entry['expires_at'])}"
    )
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


def confirmations_table(rows: list[Any]) -> Table:
    """The table of ``turnkit confirmations list``."""
    table = Table(title="confirmations", title_justify="left")
    for column in ("id", "tool", "caller", "status", "expires", "arguments"):
        table.add_column(column, overflow="fold")
    for c in rows:
        table.add_row(
            c.id, c.tool, c.caller.identity, c.status, c.expires_at_iso, compact(c.input, 80)
        )
    return table
