"""``turnkit keys create|list|revoke``: the API keys REST and MCP callers carry.

A key is kept in the ledger's database (the ``--db`` every other command and ``turnkit serve``
use), only as a hash: its secret is printed once, by ``create``, and never again. Revoking takes
effect at the next request, in every process serving that database. ``create`` given the modules
it will serve (``--module``, ``--entry-points``, ``--demo``) warns about scopes and tools no module
has; with or without them, about a key that may both write and decide (``key_checks``).
"""

from __future__ import annotations

import json
import time
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from turnkit.cli.key_checks import UNCHECKED, key_warnings
from turnkit.cli.options import (
    HELP_MARKUP,
    PERIODS,
    USAGE,
    Db,
    Demo,
    EntryPoints,
    HelpGroup,
    Modules,
    Upstreams,
    console,
    friendly,
    period_seconds,
    records,
)
from turnkit.cli.session import close_upstreams, registry_of
from turnkit.ledger.records import iso
from turnkit.registry.tool import Tool

app = typer.Typer(
    help="API keys for REST and MCP callers.",
    no_args_is_help=True,
    rich_markup_mode=HELP_MARKUP,
    cls=HelpGroup,
)

Json = Annotated[bool, typer.Option("--json", help="JSON, for scripts.")]


@app.command()
def create(
    user: Annotated[str, typer.Option(help="The owner: whose permissions the key's calls use.")],
    scope: Annotated[
        list[str] | None,
        typer.Option(help="A scope the key carries, e.g. catalogue.products:read (repeatable)."),
    ] = None,
    allow: Annotated[
        list[str] | None,
        typer.Option(help="The only tools the key may use, by name (repeatable); default: all."),
    ] = None,
    expires_in: Annotated[
        str | None,
        typer.Option(
            help=f"How long the key works, a number and a unit: {PERIODS}; default never."
        ),
    ] = None,
    name: Annotated[
        str | None,
        typer.Option(help="What the key is for, e.g. 'billing bot' (shown to approvers)."),
    ] = None,
    db: Db = None,
    module: Modules = None,
    upstream: Upstreams = None,
    entry_points: EntryPoints = False,
    demo: Demo = False,
    as_json: Json = False,
) -> None:
    """Make a key and print its secret, once: store it now, it cannot be shown again. With the
    modules it will serve (--module, --entry-points or --demo), its scopes and allowed tools are
    checked against their tools."""
    seconds = None if expires_in is None else _seconds(expires_in)
    tools, notes = _tools(module, entry_points, demo, upstream)
    opened = records(db)
    try:
        with friendly():
            key, secret = opened.storage.ledger.keys.create(
                user, scope or [], allow=allow, expires_in=seconds, name=name
            )
    finally:
        opened.close()
    told = Console(stderr=True, highlight=False) if as_json else console  # stdout stays JSON
    for note in notes + key_warnings(key.scopes, key.allow, tools):
        told.print(f"[yellow]warning:[/] {escape(note)}")
    if tools is None:
        told.print(f"[dim]{escape(UNCHECKED)}[/]")
    if as_json:
        typer.echo(json.dumps({**key.as_dict(), "secret": secret}))
        return
    until = "never expires" if key.expires_at is None else f"expires {iso(key.expires_at)}"
    named = f" ({escape(key.name)})" if key.name else ""
    console.print(f"key [bold]{key.id}[/]{named} for {escape(key.user_id)} · {until}")
    console.print(f"scopes: {escape(', '.join(sorted(key.scopes)) or '(none: system tools only)')}")
    if key.allow is not None:
        console.print(f"allowed tools: {escape(', '.join(sorted(key.allow)))}")
    console.print("[yellow]the secret, shown this once (store it now):[/]")
    typer.echo(secret)
    console.print("[dim]send it as: Authorization: Bearer <secret>[/]")


@app.command("list")
def list_(db: Db = None, as_json: Json = False) -> None:
    """Every key: id, name, owner, scopes, allowed tools, when it was made and last used (to
    within a minute), expiry, revocation (never a secret)."""
    opened = records(db)
    try:
        found = opened.storage.ledger.keys.list()
    finally:
        opened.close()
    if as_json:
        typer.echo(json.dumps([key.as_dict() for key in found]))
        return
    if not found:
        console.print("no keys yet: `turnkit keys create --user USER --scope SCOPE` makes one")
        return
    now = time.time()
    table = Table(title="keys", title_justify="left")
    columns = ("id", "name", "user", "scopes", "allow", "created", "last used", "expires", "status")
    for column in columns:
        table.add_column(column, no_wrap=column == "id", overflow="fold")
    for key in found:
        table.add_row(
            key.id,
            key.name or "-",
            key.user_id,
            " ".join(sorted(key.scopes)) or "-",
            "all" if key.allow is None else " ".join(sorted(key.allow)),
            iso(key.created_at),
            "never" if key.last_used_at is None else iso(key.last_used_at),
            "never" if key.expires_at is None else iso(key.expires_at),
            "active" if key.refused(now) is None else ("revoked" if key.revoked_at else "expired"),
        )
    console.print(table)


@app.command()
def revoke(
    key_id: Annotated[str, typer.Argument(help="The key's id (key_...).")], db: Db = None
) -> None:
    """Revoke a key: every request that carries it is refused from now on, and the writes it
    made that still wait for a person are closed (forbidden: nothing runs)."""
    opened = records(db)
    try:
        keys = opened.storage.ledger.keys
        key = keys.get(key_id.strip())
        if key is None:
            console.print(f"[red]no key {key_id!r}[/]: `turnkit keys list` shows the ids")
            raise typer.Exit(USAGE)
        if keys.revoke(key.id):
            console.print(f"revoked {key.id} ({escape(key.user_id)}'s): it is refused from now on")
        else:
            console.print(
                f"{key.id} was revoked before, at {iso(key.revoked_at or 0)}; nothing changed"
            )
        revoked = keys.get(key.id)
        closed = 0 if revoked is None else opened.executor.end_key_holds(revoked)
        if closed:  # its held writes end with it: nobody may approve them any more
            console.print(
                f"{closed} write(s) it made that waited for a person are closed: forbidden (key"
                " revoked), nothing ran (`turnkit confirmations list --all` shows them)"
            )
    finally:
        opened.close()


def _tools(
    modules: list[str] | None, entry_points: bool, demo: bool, upstreams: list[str] | None
) -> tuple[list[Tool] | None, list[str]]:
    """The tools of the modules given, and the modules' own warnings; None when none was given
    (a mistake in them ends the command before any key is made)."""
    if not modules and not entry_points and not demo and not upstreams:
        return None, []
    with friendly():
        registry = registry_of(modules or [], entry_points, demo, None, upstreams)
    try:
        return list(registry.tools), [str(warning) for warning in registry.warnings]
    finally:
        close_upstreams(registry)


def _seconds(text: str) -> float:
    """``--expires-in``: a whole number and a unit (``30d``); a person's typo ends the command."""
    seconds = period_seconds(text)
    if seconds is None:
        console.print(
            f"[red]--expires-in {text!r} is not a duration[/]: give a whole number and a unit,"
            f" one of {PERIODS}"
        )
        raise typer.Exit(USAGE)
    return seconds
