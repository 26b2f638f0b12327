"""What ``turnkit confirmations approve|reject`` does for one confirmation, whether it was named by
its id or is one of many (``--all``): the checks before an approval, the decision itself, and
how its answer is told in a line."""

from __future__ import annotations

from typing import Any

from rich.markup import escape

from turnkit.cli import render
from turnkit.cli.session import Session
from turnkit.executor.answers import Answer, Held, Ran, Refused, Rejected
from turnkit.executor.confirmations import CONFIRM_ANY
from turnkit.ledger import Confirmation
from turnkit.registry.caller import Caller

__all__ = ["cannot_approve", "decide_one", "told", "waiting"]


def cannot_approve(opened: Session, held: Confirmation) -> str | None:
    """Why approving here would answer for the wrong reason (and close it for good), or None."""
    tool = opened.executor.registry.get(held.tool)
    if tool is None:
        return (
            f"the tool {held.tool!r} is not loaded in this command: pass --module"
            " package.module:object (the module that declares it), as your application does"
        )
    if tool.permission is not None and not opened.knows_rights(
        held.caller.user_id, tool.permission
    ):
        return (
            f"approving runs {held.tool!r} as {held.caller.identity}, which needs the permission"
            f" {tool.permission!r}, and this command cannot tell who holds it"
            f"{_demo_rights(opened)}: pass --permissions package.module:provider (your"
            " application's permission provider)"
        )
    return None  # the rest this command's configuration decides, the executor tells (pending)


def decide_one(
    opened: Session, held: Confirmation, decision: Any, decider: str, *, shown: bool = False
) -> Answer:
    """Decide ``held`` as ``decider``, through the executor (rights checked now, at most one
    run whoever decides first). Without the application's provider, the operator decides for
    others, on the record (``--as``). ``shown``: the person decided on ``held`` as it was listed
    to them (a bulk decision): arguments another approver edited since are not approved."""
    if opened.granted is not None and decider != held.caller.user_id:
        opened.granted.grant(decider, CONFIRM_ANY)
    seen = held.input_hash if shown else None
    return opened.executor.decide(held.id, Caller.session(decider), decision, seen=seen)


def waiting(answer: Answer) -> str | None:
    """``approved 1 of 2: waiting for another approver`` when the approval was counted and more
    are needed (a ``Held`` answer to an approver carries the count), else None."""
    if not isinstance(answer, Held) or answer.already_decided or answer.approvals_needed is None:
        return None
    return (
        f"approved {answer.approvals_given} of {answer.approvals_needed}: waiting for another"
        " approver"
    )


def told(answer: Answer, held: Confirmation) -> str:
    """One item's line of a decision on many: what happened to it (rich markup); ``held`` is
    the confirmation as it stands after the decision."""
    if answer.already_decided:
        return f"[dim]already decided: {escape(render.decided(held))}; nothing ran now[/]"
    match answer:
        case Ran(result=result):
            return f"[green]ran[/]: {escape(render.compact(result, 100))}"
        case Rejected():
            return "[yellow]rejected[/]: nothing ran"
        case Held():
            return f"[yellow]{escape(waiting(answer) or 'still held')}[/]"
        case Refused(code=code, message=message):
            return f"[red]refused ({escape(code)})[/]: {escape(message)}"
    return escape(render.compact(answer.to_json(), 100))


def _demo_rights(opened: Session) -> str:
    """On the demo, whose the demo's permissions are (the chat's ``--grant`` is not known here)."""
    if not opened.demo:
        return ""
    from turnkit.demo import DEMO_USER

    return f" (with --demo, only the demo user {DEMO_USER!r} holds the demo's permissions)"
