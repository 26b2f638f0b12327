"""What the ``turnkit`` commands share: the console, the common options, and the error rule.

A mistake a person can make (a bad ``--db``, a model that cannot be built, an unknown id) is told
in one or two lines with what to do, and the command exits with status 2 — never a traceback.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from turnkit.cli.session import Session, open_records, open_session
from turnkit.errors import TurnkitError

console = Console(highlight=False)

USAGE = 2
"""Exit status of a mistake in how the command was used (an option, a URL, an id)."""
ALREADY_DECIDED = 3
"""Exit status of a decision on a confirmation decided before: nothing ran now."""
REFUSED = 1
"""Exit status of a decision the executor refused, or a write that answered an error."""

Db = Annotated[
    str | None,
    typer.Option(
        help="Storage: a SQLite file (default .turnkit/turnkit.sqlite) or postgresql://..."
    ),
]
Modules = Annotated[
    list[str] | None,
    typer.Option(
        "--module",
        help="A module as package.module:object, a class or factory is called (repeatable);"
        " default: the demo.",
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
    typer.Option(
        "--act",
        help="A module in which the agent may write, for this command only (repeatable); the"
        " setting api_session_write_modules in the ledger wins.",
    ),
]


@contextmanager
def friendly() -> Iterator[None]:
    """Tell a turnkit error in one or two lines and exit with ``USAGE``."""
    try:
        yield
    except TurnkitError as exc:
        console.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(USAGE) from None


def session(
    db: str | None,
    modules: list[str] | None,
    entry_points: bool,
    catalogue: str | None,
    user: str,
    grants: list[str] | None,
    act: list[str] | None,
    permissions: str | None = None,
) -> Session:
    """The session of a command, its warnings shown; a mistake ends the command (``USAGE``)."""
    with friendly():
        opened = open_session(
            db=db,
            modules=modules or [],
            entry_points=entry_points,
            catalogue=catalogue,
            user=user,
            grants=grants or [],
            act=act or [],
            permissions=permissions,
        )
    for note in opened.notes:
        console.print(f"[yellow]warning:[/] {escape(note)}")
    return opened


def records(db: str | None) -> Session:
    """The storage alone, for a command on the ledger's records (no module, no warning about
    them); a mistake ends the command (``USAGE``)."""
    with friendly():
        return open_records(db)
