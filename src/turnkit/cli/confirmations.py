"""``turnkit confirmations list|show|approve|reject``: held writes, read and decided out of band.

An id may be given whole or as a unique prefix of at least ``SHORTEST`` characters. Deciding a
confirmation decided before runs nothing and says who decided it, when and how (exit status
``ALREADY_DECIDED``). Approving runs the held tool's code, so it needs the module that declares
it (``--module``, ``--entry-points``, or ``--demo`` for a write the demo held): without one it is
refused before any module is loaded. An approval that this command could only answer for the
wrong reason — the module not loaded, the held user's rights unknown here, the agent's switch
unknown here — is refused before anything is decided. Rejecting runs nothing and needs no module.
``approve --all`` and ``reject --all`` decide many after one question (``bulk.py``); ``show``
prints one whole, its preview, request and audit trail included.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.markup import escape

from turnkit.cli import bulk, render
from turnkit.cli.deciding import cannot_approve, decide_one, waiting
from turnkit.cli.options import (
    ALREADY_DECIDED,
    FAILED,
    HELP_MARKUP,
    USAGE,
    Act,
    Catalogue,
    Db,
    Demo,
    EntryPoints,
    HelpGroup,
    Modules,
    Permissions,
    Upstreams,
    answer_status,
    console,
    friendly,
    records,
    session,
)
from turnkit.cli.session import Session
from turnkit.cli.telemetry import export_this_command
from turnkit.executor.answers import Refused
from turnkit.ledger import Confirmation

app = typer.Typer(
    help="List and decide writes that wait for a person.",
    no_args_is_help=True,
    rich_markup_mode=HELP_MARKUP,
    cls=HelpGroup,
)

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
def show(
    confirmation_id: Id,
    db: Db = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object, for scripts.")] = False,
) -> None:
    """One confirmation whole: tool, who asked, thread, times, arguments, preview, the request
    that led to it, approvals, decision, outcome and its audit trail."""
    opened = records(db)
    try:
        with friendly():
            held = _find(opened, confirmation_id)
        audit = opened.storage.ledger.audit_rows(AUDIT_ROWS, confirmation_ids=[held.id])
        clock = opened.executor.clock()
        if as_json:
            body = render.detail_json(held, audit, clock)
            typer.echo(json.dumps(body, indent=2, ensure_ascii=False))
        else:
            render.detail(console, held, audit, clock)
            if held.status == "pending" and held.expires_at > clock:
                console.print(
                    f"[dim]decide: turnkit confirmations approve {held.id[:8]} --module ... |"
                    f" reject {held.id[:8]} --message ...[/]"
                )
    finally:
        opened.close()


AUDIT_ROWS = 100
"""The most audit rows ``show`` prints of one confirmation (its hold, its runs, its repeats)."""


Everything = Annotated[
    bool, typer.Option("--all", help="Every pending one (of --tool), after one question.")
]
OfTool = Annotated[str | None, typer.Option("--tool", help="With --all: only this tool's.")]
Yes = Annotated[
    bool, typer.Option("--yes", help="With --all: decide without the question (for scripts).")
]
MaybeId = Annotated[
    str | None,
    typer.Argument(
        help=f"The confirmation's id, or a unique prefix of it ({SHORTEST}+); or --all.",
        show_default=False,
    ),
]


@app.command()
def approve(
    confirmation_id: MaybeId = None,
    all_: Everything = False,
    tool: OfTool = None,
    yes: Yes = False,
    as_: Decider = "operator",
    db: Db = None,
    module: Modules = None,
    upstream: Upstreams = None,
    entry_points: EntryPoints = False,
    demo: Demo = False,
    catalogue: Catalogue = None,
    permissions: Permissions = None,
    act: Act = None,
) -> None:
    """Approve a held write now: it runs (rights checked again) and its outcome is stored.
    Give the module that declares its tool (--module), or --demo for a write the demo held.
    --all [--tool T] approves every pending one (of T) after one question."""
    export_this_command()
    given = _one_or_all(confirmation_id, all_, tool, yes)
    if not module and not upstream and not entry_points and not demo:
        _refuse_without_module(db, given)
    options = (db, module, entry_points, demo, catalogue, permissions, act, upstream)
    if given is None:
        opened = session(
            db, module, entry_points, demo, catalogue, "demo", None, act, permissions, upstream
        )
        try:
            bulk.decide_all(opened, "approve", "approve", as_, tool, yes)
        finally:
            opened.close()
        return
    _decide(given, "approve", as_, *options)


@app.command()
def reject(
    confirmation_id: MaybeId = None,
    message: Annotated[str | None, typer.Option(help="Why (the model reads it).")] = None,
    all_: Everything = False,
    tool: OfTool = None,
    yes: Yes = False,
    as_: Decider = "operator",
    db: Db = None,
    module: Modules = None,
    entry_points: EntryPoints = False,
    demo: Demo = False,
    catalogue: Catalogue = None,
    permissions: Permissions = None,
) -> None:
    """Reject a held write: nothing runs (no module is needed); a paused conversation sees the
    rejection. --all [--tool T] rejects every pending one (of T) after one question."""
    export_this_command()
    given = _one_or_all(confirmation_id, all_, tool, yes)
    decision = {"action": "reject", "message": message}
    options = (db, module, entry_points, demo, catalogue, permissions, None, None)
    if given is None:
        opened = session(db, module, entry_points, demo, catalogue, "demo", None, None, permissions)
        try:
            bulk.decide_all(opened, "reject", decision, as_, tool, yes)
        finally:
            opened.close()
        return
    _decide(given, decision, as_, *options)


def _one_or_all(given: str | None, all_: bool, tool: str | None, yes: bool) -> str | None:
    """The id named, or None for ``--all``; a mix of the two, or neither, ends the command."""
    problem = None
    if given is not None and all_:
        problem = "give an id or --all, not both"
    elif given is None and not all_:
        problem = "give the confirmation's id, or --all (with --tool T for one tool's)"
    elif given is not None and (tool is not None or yes):
        problem = "--tool and --yes go with --all (an id names one confirmation already)"
    if problem is not None:
        console.print(f"[red]{escape(problem)}[/]: `turnkit confirmations list` shows the ids")
        raise typer.Exit(USAGE)
    return given


def _refuse_without_module(db: str | None, given: str | None) -> None:
    """End an approval given no module: it would run a held tool's code that no option names.
    The confirmation is read (to name its tool), nothing is loaded or decided."""
    if given is None:
        console.print(
            "[red]approving runs the held tools' code: pass --module package.module:object (the"
            " module that declares them), --upstream NAME=URL for an MCP server's, or --demo for"
            " writes the demo held[/]\nnothing was"
            " decided: they are still pending"
        )
        raise typer.Exit(USAGE)
    opened = records(db)
    try:
        held = _pending(opened, given)
    finally:
        opened.close()
    held_by = f"module {held.module!r}, " if held.module else ""
    console.print(
        f"[red]approving runs the held tool's code: pass --module package.module:object (the"
        f" {escape(held_by)}which declares {escape(repr(held.tool))}), --upstream NAME=URL if an"
        " MCP server's tool held it, or --demo if it was held"
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
    upstream: list[str] | None,
) -> None:
    opened = session(
        db, module, entry_points, demo, catalogue, "demo", None, act, permissions, upstream
    )
    try:
        held = _pending(opened, given)
        problem = cannot_approve(opened, held) if decision == "approve" else None
        if problem is not None:
            console.print(f"[red]{escape(problem)}[/]\nnothing was decided: it is still pending")
            raise typer.Exit(USAGE)
        answer = decide_one(opened, held, decision, decider)
        if answer.already_decided:  # another process decided between the two reads
            now = opened.executor.confirmation(held.id) or held
            console.print(f"already decided: {escape(render.decided(now))}; nothing ran now")
            raise typer.Exit(ALREADY_DECIDED)
        match answer:
            case Refused(code="cannot_decide_here", message=message):  # this command's settings
                console.print(f"[red]{escape(message)}[/]")
                raise typer.Exit(USAGE)
        counted = waiting(answer)
        if counted is not None:  # more approvals are needed: nothing ran yet
            console.print(f"  [yellow]{escape(counted)}[/]")
            return
        render.answer(console, answer)
        if isinstance(answer, Refused):
            after = opened.executor.confirmation(held.id)
            still = after is not None and after.status == "pending"
            status = answer_status(answer.code)
            if still:
                console.print(
                    "[yellow]it is still pending[/]: do what the line above says, then decide"
                    f" again (`turnkit confirmations show {held.id[:8]}` shows who asked)"
                )
            elif status == FAILED:  # it ran (or may have): never again, whoever decides
                console.print(
                    "[red]it is closed: the write was tried and failed[/]"
                    f" (`turnkit confirmations show {held.id[:8]}` shows its outcome)"
                )
            else:
                console.print("[dim]it is closed: nothing ran[/]")
            raise typer.Exit(status)
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
