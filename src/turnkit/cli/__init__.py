"""``turnkit``: chat with governed tools, list what a caller sees, decide held writes, run the demo.

Thin wiring only: options become a session (``session.py``); turns are run and shown by
``chat.py`` and ``render.py``; ``confirmations``, ``settings``, ``keys``, ``ledger``, ``notify``
and ``report`` are sub-commands of their own; ``audit`` reads the audit (``audit.py``), ``threads``
lists the conversation threads (``threads.py``), ``bench serve`` loads a running server
(``bench.py``, its generator in ``load.py``).
A person's mistake is told in one or two lines (``options.friendly``), never as a traceback.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from turnkit.cli import (
    audit,
    bench,
    confirmations,
    keys,
    ledger,
    notify,
    report,
    serve,
    settings,
    threads,
)
from turnkit.cli.options import (
    FAILED,
    HELP_MARKUP,
    INTERRUPTED,
    STOPPED,
    USAGE,
    Act,
    Catalogue,
    Db,
    Demo,
    EntryPoints,
    Grants,
    GrantsOrPermissions,
    HelpGroup,
    Interrupted,
    Modules,
    Upstreams,
    User,
    console,
    friendly,
    need_tools,
    repeated,
    session,
)
from turnkit.cli.session import SCRIPTED
from turnkit.errors import StorageError
from turnkit.ledger.urls import pooler_problem, shown

app = typer.Typer(
    name="turnkit",
    help="Governed tool-calling turns: the model sees what you may use, writes wait for your yes.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=HELP_MARKUP,
    cls=HelpGroup,
)


def _version(asked: bool) -> None:
    if asked:
        from turnkit import __version__

        console.print(f"turnkit {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print turnkit's version and exit."
        ),
    ] = False,
) -> None:
    """Governed tool-calling turns: the model sees what you may use, writes wait for your yes."""


app.add_typer(confirmations.app, name="confirmations")
app.add_typer(settings.app, name="settings")
app.add_typer(keys.app, name="keys")
app.add_typer(ledger.app, name="ledger")
app.add_typer(report.app, name="report")
app.add_typer(notify.app, name="notify")
app.add_typer(bench.app, name="bench")
app.command()(serve.serve)
app.command()(audit.audit)
app.command()(threads.threads)


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
    upstream: Upstreams = None,
    entry_points: EntryPoints = False,
    demo: Demo = False,
    catalogue: Catalogue = None,
    user: User = "demo",
    grant: Grants = None,
    permissions: GrantsOrPermissions = None,
    act: Act = None,
) -> None:
    """Chat in the terminal; held writes are shown with their arguments and decided here."""
    from langchain_core.runnables import RunnableConfig

    from turnkit.cli.chat import Left, chat_loop, waiting_in
    from turnkit.cli.session import make_model
    from turnkit.graph.build import build_turn_graph
    from turnkit.turn.context import TurnContext

    need_tools(module, entry_points, demo, "turnkit chat --demo --model scripted", upstream)
    with friendly():
        chat_model = make_model(model, base_url)
    opened = session(
        db, module, entry_points, demo, catalogue, user, grant, act, permissions, upstream
    )
    thread_id = thread or f"chat-{uuid.uuid4().hex[:8]}"
    hint = "continue with: " + repeated(
        "turnkit chat",
        [("--demo", demo), ("--module", module), ("--upstream", upstream),
         ("--entry-points", entry_points),
         ("--thread", thread_id), ("--model", model), ("--base-url", base_url),
         ("--db", shown(db) if db else None), ("--catalogue", catalogue),
         ("--user", None if user == "demo" else user), ("--grant", grant),
         ("--permissions", permissions), ("--act", act)],
    )  # fmt: skip
    interrupted = False
    try:
        graph = build_turn_graph(
            opened.executor, chat_model, checkpointer=opened.storage.checkpointer
        )
        config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        label = (
            " [yellow](scripted demo model: no language model is used)[/]"
            if (model or os.environ.get("TURNKIT_MODEL")) == SCRIPTED
            else ""
        )
        console.print(
            f"turnkit chat · thread [bold]{escape(thread_id)}[/] ·"
            f" {escape(opened.caller.identity)}{label}"
        )
        if thread is not None and not graph.get_state(config).values:
            console.print(f"[dim]no conversation {thread!r} yet: a new one starts[/]")
        console.print(
            "[dim]type a message; /help lists the commands; /quit, Ctrl-D or Ctrl-C to leave[/]"
        )
        chat_loop(graph, opened.executor, config, TurnContext(caller=opened.caller), console)
    except (Left, KeyboardInterrupt) as left:
        interrupted = not isinstance(left, Left) or left.interrupted
        console.print()  # off the prompt's line
        waiting = waiting_in(opened.executor, opened.caller, thread_id)
        if waiting:
            console.print(
                f"[yellow]{len(waiting)} write(s) still wait for a decision in this thread[/]"
            )
    finally:
        console.print(f"[dim]bye · {escape(hint)}[/]")
        opened.close()
    if interrupted:
        raise Interrupted()


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
    upstream: Upstreams = None,
    entry_points: EntryPoints = False,
    demo: Demo = False,
    catalogue: Catalogue = None,
    grant: Grants = None,
    permissions: GrantsOrPermissions = None,
    act: Act = None,
) -> None:
    """The tools a caller may see now, and which of them wait for a confirmation; with none,
    why each is hidden."""
    from turnkit.cli.listing import caller_of, hidden, rows

    need_tools(module, entry_points, demo, "turnkit tools --demo", upstream)
    with friendly():
        who = caller_of(caller, scope or [])
    user = who.user_id or "demo"
    opened = session(
        db, module, entry_points, demo, catalogue, user, grant, act, permissions, upstream
    )
    try:
        from turnkit.cli.render import tools_table

        found = rows(opened.executor, who)
        if found:
            console.print(tools_table(found, f"tools {who.identity} sees now"))
        else:
            console.print(f"{escape(who.identity)} sees no tools now:")
            for name, reason in hidden(opened.executor, who):
                console.print(f"  {escape(name)}: {escape(reason)}")
    finally:
        opened.close()


@app.command()
def demo(
    db: Annotated[
        str | None, typer.Option(help="Storage (default: a new temporary folder).")
    ] = None,
) -> None:
    """The whole flow offline on the demo catalogue, with the scripted demo model."""
    # its folder goes on every exit: the end, a mistake (exit 2), an error, Ctrl-C
    with tempfile.TemporaryDirectory(prefix="turnkit-demo-", ignore_cleanup_errors=True) as made:
        _demo(Path(made), db)


def _demo(folder: Path, db: str | None) -> None:
    """``turnkit demo`` in ``folder``: the catalogue's file, and the storage unless ``db``."""
    from langchain_core.messages import HumanMessage
    from langchain_core.runnables import RunnableConfig

    from turnkit.cli.chat import run_turn
    from turnkit.cli.session import make_model
    from turnkit.graph.build import build_turn_graph
    from turnkit.turn.context import TurnContext

    opened = session(
        db or str(folder / "turnkit.sqlite"),
        [],
        False,
        True,
        str(folder / "catalogue.sqlite"),
        "demo",
        [],
        [],
    )
    try:
        console.print(
            "[bold]turnkit demo[/] · [yellow]scripted demo model: no language model is used[/]"
        )
        where = shown(db) if db else "a temporary folder, removed at the end (--db FILE keeps it)"
        console.print(f"[dim]storage {escape(where)} · caller {opened.caller.identity}[/]")
        graph = build_turn_graph(
            opened.executor, make_model(SCRIPTED, None), checkpointer=opened.storage.checkpointer
        )
        config: RunnableConfig = {"configurable": {"thread_id": f"demo-{uuid.uuid4().hex[:8]}"}}
        text = "Make our first product 10% cheaper."
        console.print(f"[bold green]you>[/] {text}")

        def approve_for_the_demo(entry: dict[str, object]) -> str:
            console.print("[bold]approve, edit or reject?[/] a [dim](the demo approves)[/]")
            return "approve"

        run_turn(
            graph,
            {"messages": [HumanMessage(text)]},
            config,
            TurnContext(caller=opened.caller),
            console,
            approve_for_the_demo,
        )
        audit = opened.storage.ledger.audit_rows(10)
        writes = [r for r in audit if r["tool"] == "catalogue.set_prices" and r["status"] == "ok"]
        console.print(
            f"[dim]audit: {len(audit)} calls recorded; the price write ran {len(writes)} time(s)[/]"
        )
    finally:
        opened.close()


def main() -> None:
    """The ``turnkit`` console script: a failure the commands did not foresee (say, in the
    application's own module or provider) is told in a line, with how to see the traceback;
    Ctrl-C at any moment ends with one line and ``INTERRUPTED`` (the import of turnkit before
    this runs is guarded by the console script's module, ``_turnkit_entry``)."""
    # a module's left-out tools are told once, as the session's ``warning:`` lines; without a
    # handler Python's last resort would print each a second time
    logging.getLogger("turnkit.registry").addHandler(logging.NullHandler())
    try:
        sys.exit(app())
    except Interrupted:
        raise
    except SystemExit as done:
        if done.code == INTERRUPTED:  # Typer's answer to a Ctrl-C in a command: exit 130, silently
            stopped()
        raise
    except KeyboardInterrupt:  # outside a command (parsing the options)
        stopped()
    except Exception as exc:
        if os.environ.get("TURNKIT_DEBUG"):
            raise
        told = exc if isinstance(exc, StorageError) else pooler_problem(None, exc)
        if told is not None:  # the --db URL, say a pooler it does not mention: the person's fix
            console.print(f"[red]{escape(str(told))}[/]")
            sys.exit(USAGE)
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:400]
        console.print(f"[red]turnkit stopped: {escape(reason)}[/]")
        console.print("[dim]TURNKIT_DEBUG=1 shows the traceback[/]")
        sys.exit(FAILED)


def stopped() -> None:
    """End with ``STOPPED`` and ``INTERRUPTED``; a second Ctrl-C while closing ends the process
    at once, without a traceback."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    console.print(f"\n[dim]{STOPPED}[/]")
    sys.exit(INTERRUPTED)


__all__ = ["USAGE", "app", "main"]
