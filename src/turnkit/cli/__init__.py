"""``turnkit``: chat with governed tools, list what a caller sees, decide held writes, run the demo.

Thin wiring only: options are turned into a session (``session.py``), turns are run and shown by
``chat.py`` and ``render.py``.
"""

from __future__ import annotations

import sys
import tempfile
import uuid
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from turnkit.cli.session import SCRIPTED, Session, SetupError, open_session
from turnkit.registry.caller import Caller
from turnkit.registry.confirmations import CONFIRM_ANY

app = typer.Typer(
    name="turnkit",
    help="Governed tool-calling turns: the model sees what you may use, writes wait for your yes.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
confirmations = typer.Typer(
    help="List and decide writes that wait for a person.", no_args_is_help=True
)
app.add_typer(confirmations, name="confirmations")
console = Console(highlight=False)

Db = Annotated[
    str | None,
    typer.Option(
        help="Storage: a SQLite file (default .turnkit/turnkit.sqlite) or postgresql://..."
    ),
]
Modules = Annotated[
    list[str] | None,
    typer.Option(
        "--module", help="A module as package.module:object (repeatable); default: the demo."
    ),
]
EntryPoints = Annotated[
    bool, typer.Option("--entry-points", help="Also load modules of the turnkit.modules group.")
]
Catalogue = Annotated[
    str | None,
    typer.Option(help="The demo catalogue's SQLite file (default .turnkit/catalogue.sqlite)."),
]
User = Annotated[str, typer.Option(help="The signed-in user the agent acts for.")]
Grants = Annotated[
    list[str] | None, typer.Option("--grant", help="A permission the user holds (repeatable).")
]
Permissions = Annotated[
    str | None,
    typer.Option(
        "--permissions",
        help="Your application's permission provider as package.module:provider, a function"
        " (caller) -> permissions; default: --grant (and the demo's).",
    ),
]
Act = Annotated[
    list[str] | None,
    typer.Option("--act", help="A module in which the agent may write (repeatable)."),
]


def _session(
    db: str | None,
    modules: list[str] | None,
    entry_points: bool,
    catalogue: str | None,
    user: str,
    grants: list[str] | None,
    act: list[str] | None,
    permissions: str | None = None,
) -> Session:
    try:
        session = open_session(
            db=db,
            modules=modules or [],
            entry_points=entry_points,
            catalogue=catalogue,
            user=user,
            grants=grants or [],
            act=act or [],
            permissions=permissions,
        )
    except SetupError as exc:
        console.print(f"[red]{exc}[/]")
        raise typer.Exit(2) from None
    for note in session.notes:
        console.print(f"[yellow]warning:[/] {note}")
    return session


@app.command()
def chat(
    db: Db = None,
    thread: Annotated[str | None, typer.Option(help="Continue this conversation.")] = None,
    model: Annotated[
        str | None,
        typer.Option(help="Model name (OpenAI-compatible), provider:model, or 'scripted'."),
    ] = None,
    base_url: Annotated[
        str | None, typer.Option(help="An OpenAI-compatible server, e.g. http://127.0.0.1:11434/v1")
    ] = None,
    module: Modules = None,
    entry_points: EntryPoints = False,
    catalogue: Catalogue = None,
    user: User = "demo",
    grant: Grants = None,
    permissions: Permissions = None,
    act: Act = None,
) -> None:
    """Chat in the terminal; held writes are shown with their arguments and decided here."""
    from turnkit.cli.chat import ask, pending, run_turn
    from turnkit.cli.session import make_model
    from turnkit.graph.build import build_turn_graph
    from turnkit.graph.context import TurnContext

    try:
        chat_model = make_model(model, base_url)
    except SetupError as exc:
        console.print(f"[red]{exc}[/]")
        raise typer.Exit(2) from None
    session = _session(db, module, entry_points, catalogue, user, grant, act, permissions)
    try:
        graph = build_turn_graph(
            session.executor, chat_model, checkpointer=session.storage.checkpointer
        )
        thread_id = thread or f"chat-{uuid.uuid4().hex[:8]}"
        config = {"configurable": {"thread_id": thread_id}}
        context = TurnContext(caller=session.caller)
        label = (
            " [yellow](scripted demo model: no language model is used)[/]"
            if model == SCRIPTED
            else ""
        )
        console.print(
            f"turnkit chat · thread [bold]{thread_id}[/] · {session.caller.identity}{label}"
        )
        console.print("[dim]type a message; /quit or Ctrl-D to leave[/]")
        decide = ask(console)
        waiting = pending(graph, config)
        if waiting:
            console.print(
                f"[yellow]{len(waiting)} write(s) of this thread wait for your decision[/]"
            )
            from langgraph.types import Command

            run_turn(graph, Command(resume={}), config, context, console, decide)
        while True:
            try:
                text = console.input("[bold green]you>[/] ")
            except EOFError:
                break
            if text.strip() in ("/quit", "/exit"):
                break
            if text.strip():
                from langchain_core.messages import HumanMessage

                run_turn(
                    graph, {"messages": [HumanMessage(text)]}, config, context, console, decide
                )
        console.print(f"[dim]bye · continue with: turnkit chat --thread {thread_id}[/]")
    finally:
        session.close()


@app.command()
def tools(
    caller: Annotated[
        str, typer.Option(help="session:<user>, key:<key id> (with --scope), or public")
    ] = "session:demo",
    scope: Annotated[
        list[str] | None, typer.Option(help="A scope of the key (repeatable).")
    ] = None,
    db: Db = None,
    module: Modules = None,
    entry_points: EntryPoints = False,
    catalogue: Catalogue = None,
    grant: Grants = None,
    permissions: Permissions = None,
    act: Act = None,
) -> None:
    """The tools a caller may see now, and which of them wait for a confirmation."""
    from turnkit.cli.listing import caller_of, rows

    who = caller_of(caller, scope or [])
    user = who.user_id or "demo"
    session = _session(db, module, entry_points, catalogue, user, grant, act, permissions)
    try:
        from turnkit.cli.render import tools_table

        table = tools_table(rows(session.executor, who), f"tools {who.identity} sees now")
        console.print(table)
    finally:
        session.close()


@confirmations.command("list")
def list_confirmations(
    db: Db = None,
    all_: Annotated[bool, typer.Option("--all", help="Also decided and expired ones.")] = False,
) -> None:
    """Confirmations waiting for a decision (or all, with --all)."""
    from turnkit.cli.render import confirmations_table
    from turnkit.storage import open_storage

    with open_storage(db or str(Path(".turnkit") / "turnkit.sqlite")) as storage:
        found = storage.ledger.list_confirmations(status=None if all_ else "pending")
        console.print(confirmations_table(found))


Decider = Annotated[
    str,
    typer.Option(
        "--as",
        help="Who decides (recorded as decided_by). With --permissions, the held user or a holder"
        " of system.confirm_any; without it, the operator may decide for anyone.",
    ),
]


@confirmations.command("approve")
def approve(
    confirmation_id: str,
    as_: Decider = "operator",
    db: Db = None,
    catalogue: Catalogue = None,
    module: Modules = None,
    entry_points: EntryPoints = False,
    permissions: Permissions = None,
) -> None:
    """Approve a held write now: it runs (rights checked again) and its outcome is stored."""
    _decide(confirmation_id, "approve", as_, db, catalogue, module, entry_points, permissions)


@confirmations.command("reject")
def reject(
    confirmation_id: str,
    message: Annotated[str | None, typer.Option(help="Why (the model reads it).")] = None,
    as_: Decider = "operator",
    db: Db = None,
    catalogue: Catalogue = None,
    module: Modules = None,
    entry_points: EntryPoints = False,
    permissions: Permissions = None,
) -> None:
    """Reject a held write: nothing runs; a paused conversation sees the rejection."""
    decision = {"action": "reject", "message": message}
    _decide(confirmation_id, decision, as_, db, catalogue, module, entry_points, permissions)


def _decide(
    confirmation_id: str,
    decision: object,
    decider: str,
    db: str | None,
    catalogue: str | None,
    module: list[str] | None,
    entry_points: bool,
    permissions: str | None,
) -> None:
    from turnkit.cli.render import outcome

    session = _session(db, module, entry_points, catalogue, "demo", [], [], permissions)
    try:
        held = session.executor.confirmation(confirmation_id)
        if held is None:
            console.print(f"[red]no confirmation {confirmation_id!r}[/]")
            raise typer.Exit(1)
        approving = decision == "approve"
        problem = _cannot_approve(session, held.tool) if approving else None
        if problem is not None:
            console.print(f"[red]{problem}[/]\nnothing was decided: it is still pending")
            raise typer.Exit(2)
        if not session.checks_permissions and decider != held.caller.user_id:
            # without the application's provider, the operator decides for others, on the record
            session.executor.permissions.grant(decider, CONFIRM_ANY)  # type: ignore[attr-defined]
        answer = session.executor.confirm(confirmation_id, Caller.session(decider), decision)
        outcome(console, answer)
        if answer.get("status") == "error":
            after = session.executor.confirmation(confirmation_id)
            still = after is not None and after.status == "pending"
            console.print(
                "[yellow]it is still pending[/]" if still else "[dim]it is closed: nothing ran[/]"
            )
            raise typer.Exit(1)
    finally:
        session.close()


def _cannot_approve(session: Session, tool_name: str) -> str | None:
    """Why approving here would answer for the wrong reason (and close it for good), or None."""
    tool = session.executor.registry.get(tool_name)
    if tool is None:
        return (
            f"the tool {tool_name!r} is not loaded in this command: pass --module"
            " package.module:object (the module that declares it), as your application does"
        )
    if tool.permission is not None and not (session.demo or session.checks_permissions):
        return (
            f"approving runs {tool_name!r}, which needs the permission {tool.permission!r}, and"
            " this command cannot tell who holds it: pass --permissions package.module:provider"
            " (your application's permission provider)"
        )
    return None


@app.command()
def demo(
    db: Annotated[
        str | None, typer.Option(help="Storage (default: a new temporary folder).")
    ] = None,
) -> None:
    """The whole flow offline on the demo catalogue, with the scripted demo model."""
    from turnkit.cli.chat import run_turn
    from turnkit.cli.session import make_model
    from turnkit.graph.build import build_turn_graph
    from turnkit.graph.context import TurnContext

    folder = Path(tempfile.mkdtemp(prefix="turnkit-demo-"))
    session = _session(
        db or str(folder / "turnkit.sqlite"),
        [],
        False,
        str(folder / "catalogue.sqlite"),
        "demo",
        [],
        [],
    )
    try:
        console.print(
            "[bold]turnkit demo[/] · [yellow]scripted demo model: no language model is used[/]"
        )
        console.print(f"[dim]storage {session.storage.url} · caller {session.caller.identity}[/]")
        graph = build_turn_graph(
            session.executor, make_model(SCRIPTED, None), checkpointer=session.storage.checkpointer
        )
        config = {"configurable": {"thread_id": f"demo-{uuid.uuid4().hex[:8]}"}}
        text = "Make our first product 10% cheaper."
        console.print(f"[bold green]you>[/] {text}")

        def approve_for_the_demo(entry: dict[str, object]) -> str:
            console.print("[bold]approve, edit or reject?[/] a [dim](the demo approves)[/]")
            return "approve"

        from langchain_core.messages import HumanMessage

        run_turn(
            graph,
            {"messages": [HumanMessage(text)]},
            config,
            TurnContext(caller=session.caller),
            console,
            approve_for_the_demo,
        )
        audit = session.storage.ledger.audit_rows(10)
        writes = [r for r in audit if r["tool"] == "catalogue.set_prices" and r["status"] == "ok"]
        console.print(
            f"[dim]audit: {len(audit)} calls recorded; the price write ran {len(writes)} time(s)[/]"
        )
    finally:
        session.close()


def main() -> None:
    """The ``turnkit`` console script."""
    sys.exit(app())
