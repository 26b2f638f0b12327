"""``turnkit confirmations approve|reject --all [--tool T]``: decide many held writes at once,
safely.

It lists what it will decide (how many, their ids, tools and who asked) and asks once: the person
types the count, or ``y``. Any other answer, an empty one, or the end of the input decides
nothing. With no terminal to ask on it refuses, unless ``--yes`` says the answer beforehand.
``--all`` without ``--tool`` is allowed; its question then states that it covers every tool.
Each confirmation is then decided through the same path as ``approve ID`` (``deciding.py``):
rights checked now, each write run at most once whoever decides first. Each gets a line of what
happened to it — ran, rejected, waiting for another approver, already decided, refused and why —
and the command ends with status ``SOME_REFUSED`` when any was refused, ``FAILED`` when a write
that ran failed (``options.answer_status``).
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any, Literal

import typer
from rich.markup import escape

from turnkit.cli import render
from turnkit.cli.deciding import cannot_approve, decide_one, told
from turnkit.cli.line_input import read_line
from turnkit.cli.options import FAILED, USAGE, answer_status, console
from turnkit.cli.session import Session
from turnkit.executor.answers import Refused
from turnkit.ledger import Confirmation

__all__ = ["SOME_REFUSED", "decide_all"]

SOME_REFUSED = USAGE
"""Exit status of a decision on many of which at least one was refused (the others went ahead)."""
SHOWN = 20
"""The most confirmations listed one per line before the question (the rest are counted)."""


def decide_all(
    opened: Session,
    verb: Literal["approve", "reject"],
    decision: Any,
    decider: str,
    tool: str | None,
    yes: bool,
) -> None:
    """List the pending confirmations (of ``tool``), ask once, decide each, tell each."""
    found = [c for c in opened.executor.pending() if tool is None or c.tool == tool]
    of = f" of {tool}" if tool else ""
    if not found:
        console.print(f"no confirmations{of} wait for a decision: nothing to {verb}")
        return
    if verb == "approve":
        _refuse_unapprovable(opened, found)
    _list(found, verb)
    if not _confirmed(len(found), verb, tool, yes):
        console.print("nothing was decided: they are still pending")
        raise typer.Exit(USAGE)
    statuses = []
    for held in found:
        answer = decide_one(opened, held, decision, decider, shown=True)
        if isinstance(answer, Refused) and not answer.already_decided:
            statuses.append(answer_status(answer.code))
        after = opened.executor.confirmation(held.id) or held  # its approvals counted now
        console.print(f"{escape(held.id)} {escape(held.tool)}: {told(answer, after)}")
    if statuses:
        console.print(
            f"[red]{len(statuses)} of {len(found)} refused or failed[/] (see above); the rest went"
            " ahead"
        )
        raise typer.Exit(FAILED if FAILED in statuses else SOME_REFUSED)


def _refuse_unapprovable(opened: Session, found: list[Confirmation]) -> None:
    """End the command before anything is decided when one of ``found`` cannot be approved here
    for the right reason (its module not loaded, its user's rights unknown)."""
    problems = dict.fromkeys(p for p in (cannot_approve(opened, c) for c in found) if p)
    if not problems:
        return
    for problem in problems:
        console.print(f"[red]{escape(problem)}[/]")
    console.print("nothing was decided: they are still pending (--tool T decides one tool's)")
    raise typer.Exit(USAGE)


def _list(found: list[Confirmation], verb: str) -> None:
    tools = Counter(c.tool for c in found)
    named = ", ".join(f"{count} of {tool}" for tool, count in sorted(tools.items()))
    console.print(f"[bold]{len(found)} confirmation(s) to {verb}[/]: {escape(named)}")
    for c in found[:SHOWN]:
        line = f"  {c.id}  {c.tool}  {c.caller_label()}  {render.compact(c.input, 60)}"
        console.print(escape(line), soft_wrap=True)
    if len(found) > SHOWN:
        console.print(f"  … and {len(found) - SHOWN} more (`turnkit confirmations list`)")


def _confirmed(count: int, verb: str, tool: str | None, yes: bool) -> bool:
    """Whether the person said yes to deciding ``count`` (``--yes``, or typed at the terminal)."""
    if yes:
        return True
    if not sys.stdin.isatty():
        console.print(
            f"[red]no terminal to ask on[/]: pass --yes to {verb} these {count} without a question"
        )
        return False
    which = f"these {count} of {tool}" if tool else f"ALL {count}, of every tool"
    try:
        said = read_line(
            console, f"{verb} {which}? type {count} or y to {verb}; anything else decides nothing: "
        )
    except EOFError:
        return False
    return said.strip().lower() in (str(count), "y", "yes")
