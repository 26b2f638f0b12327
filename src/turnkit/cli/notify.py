"""``turnkit notify add|list|test|remove|run``: who is told when a write is held, decided, expired
or ran, and the worker that tells them.

Targets are kept in the ledger's database (``--db``), like keys. A webhook's signing secret is
printed once, by ``add``, when it was made here. ``run`` delivers in the foreground until Ctrl-C;
``turnkit serve`` runs the same dispatcher in each of its workers (``--no-notify`` to not).
"""

from __future__ import annotations

import threading
import time
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from turnkit.cli.options import FAILED, HELP_MARKUP, USAGE, Db, HelpGroup, console, records
from turnkit.notify import (
    EVENTS,
    INCLUDES,
    KINDS,
    Dispatcher,
    TargetProblems,
    add_target,
    send_ping,
)

app = typer.Typer(
    help="Notifications: webhooks, Slack and email when writes are held, decided, expired or ran.",
    no_args_is_help=True,
    rich_markup_mode=HELP_MARKUP,
    cls=HelpGroup,
)

PublicUrl = Annotated[
    str | None,
    typer.Option(
        help="Where people open the web inbox (https://tools.example.com): each notification"
        " links to the confirmation's page there."
    ),
]


def _split(given: str | None, known: tuple[str, ...], what: str) -> list[str]:
    values = [value.strip() for value in (given or "").split(",") if value.strip()]
    unknown = [value for value in values if value not in known]
    if unknown:
        console.print(
            f"[red]unknown {what} {', '.join(map(repr, unknown))}[/]: use some of"
            f" {', '.join(known)}, comma-separated"
        )
        raise typer.Exit(USAGE)
    return values


@app.command()
def add(
    kind: Annotated[str, typer.Argument(help=f"One of {', '.join(KINDS)}.")],
    name: Annotated[str, typer.Argument(help="Your name for it (unique).")],
    url: Annotated[str | None, typer.Option(help="webhook, slack: where to POST.")] = None,
    secret: Annotated[
        str | None,
        typer.Option(
            help="webhook: the whsec_... signing secret; made and shown once if left out."
        ),
    ] = None,
    events: Annotated[
        str, typer.Option(help=f"Comma-separated, some of {','.join(EVENTS)}.")
    ] = ",".join(EVENTS),
    include: Annotated[
        str | None,
        typer.Option(
            help="What may leave beyond the default fields, some of"
            f" {','.join(INCLUDES)}; default none (no argument is ever sent without it)."
        ),
    ] = None,
    smtp_host: Annotated[str | None, typer.Option(help="email: the SMTP server.")] = None,
    smtp_port: Annotated[int, typer.Option(help="email: its port.")] = 587,
    sender: Annotated[str | None, typer.Option("--from", help="email: the From address.")] = None,
    to: Annotated[list[str] | None, typer.Option(help="email: a recipient (repeatable).")] = None,
    starttls: Annotated[bool, typer.Option(help="email: STARTTLS before sending.")] = False,
    user: Annotated[str | None, typer.Option(help="email: the SMTP login.")] = None,
    password_env: Annotated[
        str | None,
        typer.Option(help="email: the environment variable holding the SMTP password."),
    ] = None,
    db: Db = None,
) -> None:
    """Add a target: who is told of which events."""
    if kind not in KINDS:
        console.print(f"[red]unknown kind {kind!r}[/]: use one of {', '.join(KINDS)}")
        raise typer.Exit(USAGE)
    chosen = _split(events, EVENTS, "event")
    included = _split(include, INCLUDES, "include")
    config: dict[str, Any]
    if kind == "email":
        config = {"smtp_host": smtp_host, "smtp_port": smtp_port, "from": sender, "to": to or [],
                  "starttls": starttls, "user": user, "password_env": password_env}  # fmt: skip
    else:
        config = {"url": url} | ({"secret": secret} if kind == "webhook" and secret else {})
    opened = records(db)
    try:
        target = add_target(
            opened.storage.ledger, name, kind, config, events=chosen, include=included,
            now=time.time(),
        )  # fmt: skip
    except TargetProblems as problems:
        for problem in problems.problems:
            console.print(f"[red]{escape(problem)}[/]")
        raise typer.Exit(USAGE) from None
    finally:
        opened.close()
    console.print(
        f"target [bold]{escape(target.name)}[/] ({kind}) · events {', '.join(target.events)}"
        f" · includes {', '.join(target.include) or 'nothing beyond the default fields'}"
    )
    if kind == "webhook" and not secret:
        console.print("[yellow]the signing secret, shown this once (give it to the receiver):[/]")
        typer.echo(target.config["secret"])
    console.print(
        "[dim]delivered by `turnkit serve` or `turnkit notify run`; try it now:"
        f" turnkit notify test {escape(target.name)}[/]"
    )


@app.command("list")
def list_(db: Db = None) -> None:
    """Every target, with its deliveries: pending, sent, dead (never a secret)."""
    opened = records(db)
    try:
        ledger = opened.storage.ledger
        targets, counts = ledger.notify_targets(), ledger.delivery_counts()
    finally:
        opened.close()
    if not targets:
        console.print("no targets yet: `turnkit notify add webhook NAME --url URL` adds one")
        return
    table = Table(title="notification targets", title_justify="left")
    for column in ("name", "kind", "where", "events", "includes", "pending", "sent", "dead"):
        table.add_column(column, overflow="fold")
    for target in targets:
        states = counts.get(target.id, {})
        where = target.config.get("url") or (
            f"{target.config.get('smtp_host')}:{target.config.get('smtp_port')} ->"
            f" {', '.join(target.config.get('to') or [])}"
        )
        table.add_row(
            target.name, target.kind, escape(str(where)), ",".join(target.events),
            ",".join(target.include) or "-",
            str(states.get("pending", 0) + states.get("sending", 0)),
            str(states.get("sent", 0)), str(states.get("dead", 0)),
        )  # fmt: skip
    console.print(table)


@app.command("test")
def ping(
    name: Annotated[str, typer.Argument(help="The target's name.")],
    public_url: PublicUrl = None,
    db: Db = None,
) -> None:
    """Send the target one test notification now and say what it answered."""
    opened = records(db)
    try:
        target = opened.storage.ledger.notify_target(name=name)
    finally:
        opened.close()
    if target is None:
        console.print(f"[red]no target {name!r}[/]: `turnkit notify list` shows the names")
        raise typer.Exit(USAGE)
    answered = send_ping(target, public_url)
    if answered.ok:
        console.print(f"{escape(name)} answered: {escape(answered.detail)}")
        return
    console.print(f"[red]{escape(name)} did not take it[/]: {escape(answered.detail)}")
    raise typer.Exit(FAILED)


@app.command()
def remove(name: Annotated[str, typer.Argument(help="The target's name.")], db: Db = None) -> None:
    """Remove a target and its undelivered notifications."""
    opened = records(db)
    try:
        removed = opened.storage.ledger.remove_notify_target(name)
    finally:
        opened.close()
    if not removed:
        console.print(f"[red]no target {name!r}[/]: `turnkit notify list` shows the names")
        raise typer.Exit(USAGE)
    console.print(f"removed {escape(name)}: it is told nothing from now on")


@app.command()
def run(
    once: Annotated[bool, typer.Option("--once", help="Deliver what is due, then stop.")] = False,
    public_url: PublicUrl = None,
    lease_seconds: Annotated[
        float,
        typer.Option(
            min=1.0,
            help="How long a claimed notification is this worker's; after it (a dead worker)"
            " another sends it again.",
        ),
    ] = 60.0,
    timeout: Annotated[
        float, typer.Option(min=0.1, help="Seconds one send may take (keep it below the lease).")
    ] = 10.0,
    db: Db = None,
) -> None:
    """Deliver notifications in the foreground until Ctrl-C (any number of these, and of
    `turnkit serve`'s workers, may run on one database: each notification goes to one)."""
    if timeout >= lease_seconds:
        console.print(
            f"[red]--timeout {timeout:g} is not below --lease-seconds {lease_seconds:g}[/]: a"
            " send could outlive its claim and another worker would send it too"
        )
        raise typer.Exit(USAGE)
    opened = records(db)
    dispatcher = Dispatcher(
        opened.storage.ledger, public_url=public_url, lease_seconds=lease_seconds,
        timeout=timeout,
    )  # fmt: skip
    stop = threading.Event()
    try:
        if once:
            total = 0
            while claimed := dispatcher.run_once().claimed:
                total += claimed
            console.print(f"{total} notification(s) tried")
            return
        console.print(f"delivering notifications as {escape(dispatcher.worker_id)}; Ctrl-C stops")
        dispatcher.run_forever(stop)
    except KeyboardInterrupt:
        console.print("stopped")
    finally:
        stop.set()
        dispatcher.close()
        opened.close()
