"""``turnkit confirmations list|approve|reject``: held writes, decided out of band.

An id may be given whole or as a unique prefix of at least ``SHORTEST`` characters. Deciding a
confirmation decided before runs nothing and says who decided it, when and how (exit status
``ALREADY_DECIDED``). Approving runs the held tool's code, so it needs the module that declares
it (``--module``, ``--entry-points``, or ``--demo`` for a write the demo held): without one it is
refused before any module is loaded. An approval that this command could only answer for the
wrong reason — the module not loaded, the held user's rights unknown here, the agent's switch
unknown here — is refused before anything is decided. Rejecting runs nothing and needs no module.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.markup import escape

from turnkit.cli import render
from turnkit.cli.options import (
    ALREADY_DECIDED,
    REFUSED,
    USAGE,
    Act,
    Catalogue,
    Db,
    Demo,
    EntryPoints,
    Modules,
    Permissions,
    console,
    friendly,
    records,
    session,
)
from turnkit.cli.session import Session
from turnkit.executor.answers import Refused
from turnkit.executor.confirmations import CONFIRM_ANY
from turnkit.ledger import Confirmation
from turnkit.registry.caller import Caller

app = typer.Typer(help="List and decide writes that wait for a person.", no_args_is_help=True)

Decider = Annotated[
    str,
    typer.Option(
        "--as",
        help="Who decides (recorded as decided_by). With --permissions, the held user or a holder"
        " of system.confirm_any; without it, the operator may decide for anyone.",
    ),
]
SHORTEST = 4
"""The fewest characters of an id that name a confirmation (fewer would match by accident)."""
Id = Annotated[
    str, typer.Argument(help=f"The confirmation's id, or a unique prefix of it ({SHORTEST}+).")
]


@app.command("list")
def list_(
    db: Db = None,
    all_: Annotated[bool, typer.Option("--all", help="Also decided and expired ones.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON array, for scripts.")] = False,
) -> None:
    """Confirmations waiting for a decision (or all, with --all)."""
    opened = records(db)
    try:
        listed = opened.storage.ledger.list_confirmations(status=None if all_ else "pending")
        # a write whose process died while it ran is settled (outcome unknown) as it is listed
        found = [_settled(opened, c) for c in listed]
        clock = opened.executor.clock()
        if as_json:
            rows = [render.confirmation_json(c, clock) for c in found]
            typer.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        elif not found:
            console.print("no confirmations wait for a decision" + ("" if all_ else " (--all)"))
        else:
            render.confirmations(console, found, clock)
    finally:
        opened.close()


@app.command()
def approve(
    confirmation_id: Id,
    as_: Decider = "operator",
    db: Db = None,
    module: Modules = None,
    entry_points: EntryPoints = False,
    demo: Demo = False,
    catalogue: Catalogue = None,
    permissions: Permissions = None,
    act: Act = None,
) -> None:
    """Approve a held write now: it runs (rights checked again) and its outcome is stored.
    Give the module that declares its tool (--module), or --demo for a write the demo held."""
    if not module and not entry_points and not demo:
        _refuse_without_module(db, confirmation_id)
    options = (db, module, entry_points, demo, catalogue, permissions, act)
    _decide(confirmation_id, "approve", as_, *options)


@app.command()
def reject(
    confirmation_id: Id,
    message: Annotated[str | None, typer.Option(help="Why (the model reads it).")] = None,
    as_: Decider = "operator",
    db: Db = None,
    module: Modules = None,
    entry_points: EntryPoints = False,
    demo: Demo = False,
    catalogue: Catalogue = None,
    permissions: Permissions = None,
) -> None:
    """Reject a held write: nothing runs (no module is needed); a paused conversation sees the
    rejection."""
    options = (db, module, entry_points, demo, catalogue, permissions, None)
    _decide(confirmation_id, {"action": "reject", "message": message}, as_, *options)


def _refuse_without_module(db: str | None, given: str) -> None:
    """End an approval given no module: it would run a held tool's code that no option names.
    The confirmation is read (to name its tool), nothing is loaded or decided."""
    opened = records(db)
    try:
        held = _pending(opened, given)
    finally:
        opened.close()
    held_by = f"module {held.module!r}, " if held.module else ""
    console.print(
        f"[red]approving runs the held tool's code: pass --module package.module:object (the"
        f" {escape(held_by)}which declares {escape(repr(held.tool))}), or --demo if it was held"
        " by the demo[/]\nnothing was decided: it is still pending"
    )
    raise typer.Exit(USAGE)


def _pending(opened: Session, given: str) -> Confirmation:
    """The pending confirmation ``given`` names; one decided before ends the command
    (``ALREADY_DECIDED``), a mistake in ``given`` too (``USAGE``)."""
    with friendly():
        held = _find(opened, given)
    if held.status != "pending":
        console.print(f"already decided: {escape(render.decided(held))}; nothing ran now")
        raise typer.Exit(ALREADY_DECIDED)
    return held


def _decide(
    given: str,
    decision: Any,
    decider: str,
    db: str | None,
    module: list[str] | None,
    entry_points: bool,
    demo: bool,
    catalogue: str | None,
    permissions: str | None,
    act: list[str] | None,
) -> None:
    opened = session(db, module, entry_points, demo, catalogue, "demo", None, act, permissions)
    try:
        held = _pending(opened, given)
        problem = _cannot_approve(opened, held) if decision == "approve" else None
        if problem is not None:
            console.print(f"[red]{escape(problem)}[/]\nnothing was decided: it is still pending")
            raise typer.Exit(USAGE)
        if opened.granted is not None and decider != held.caller.user_id:
            # without the application's provider, the operator decides for others, on the record
            opened.granted.grant(decider, CONFIRM_ANY)
        answer = opened.executor.decide(held.id, Caller.session(decider), decision)
        if answer.already_decided:  # another process decided between the two reads
            now = opened.executor.confirmation(held.id) or held
            console.print(f"already decided: {escape(render.decided(now))}; nothing ran now")
            raise typer.Exit(ALREADY_DECIDED)
        match answer:
            case Refused(code="cannot_decide_here", message=message):  # this command's settings
                console.print(f"[red]{escape(message)}[/]")
                raise typer.Exit(USAGE)
        render.answer(console, answer)
        if isinstance(answer, Refused):
            after = opened.executor.confirmation(held.id)
            still = after is not None and after.status == "pending"
            console.print(
                "[yellow]it is still pending[/]" if still else "[dim]it is closed: nothing ran[/]"
            )
            raise typer.Exit(REFUSED)
    finally:
        opened.close()


def _settled(opened: Session, confirmation: Confirmation) -> Confirmation:
    if confirmation.status != "running":
        return confirmation
    return opened.executor.confirmation(confirmation.id) or confirmation


def _find(opened: Session, given: str) -> Confirmation:
    """The confirmation ``given`` names (whole, or a unique prefix of at least ``SHORTEST``
    characters); a closed one whose time ran out or whose run stopped is settled first."""
    from turnkit.cli.session import SetupError

    prefix = given.strip().lower()
    ids = [given] if opened.executor.confirmation(given) else []
    if not ids and len(prefix) < SHORTEST:
        raise SetupError(
            f"{given!r} is too short: give the id, or its first {SHORTEST} characters or more"
            " (`turnkit confirmations list` shows the ids)"
        )
    ids = ids or opened.storage.ledger.confirmation_ids(prefix)
    if not ids:
        raise SetupError(
            f"no confirmation {given!r}: `turnkit confirmations list --all` shows them all"
        )
    if len(ids) > 1:
        listed = ", ".join(ids[:5])
        raise SetupError(f"{given!r} is the start of several confirmations ({listed}): give more")
    found = opened.executor.confirmation(ids[0])
    if found is None:  # listed a moment ago, pruned since (turnkit ledger prune)
        raise SetupError(f"no confirmation {given!r} any more: it was pruned just now")
    return found


def _cannot_approve(opened: Session, held: Confirmation) -> str | None:
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


def _demo_rights(opened: Session) -> str:
    """On the demo, whose the demo's permissions are (the chat's ``--grant`` is not known here)."""
    if not opened.demo:
        return ""
    from turnkit.demo import DEMO_USER

    return f" (with --demo, only the demo user {DEMO_USER!r} holds the demo's permissions)"
