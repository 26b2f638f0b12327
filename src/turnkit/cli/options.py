"""What the ``turnkit`` commands share: the console, the common options, and the error rule.

A mistake a person can make (a bad ``--db``, a model that cannot be built, an unknown id) is told
in one or two lines with what to do, and the command exits with status 2 — never a traceback.

Exit statuses, the same in every command:

- ``0``: done.
- ``2`` (``USAGE``): refused — a person's mistake (an option, a URL, an id, a missing module) or a
  rule that says no (not allowed to decide, separate duties, expired, rate limited, arguments
  changed since shown). Nothing failed: the line says what to do instead.
- ``3`` (``ALREADY_DECIDED``): a decision on a confirmation someone decided before; nothing ran.
- ``1`` (``FAILED``): a genuine failure — a write that ran and answered an error (its tool's, a
  timeout, an outcome unknown), a target that did not take a notification, errors answered under
  a load (``turnkit bench serve``), or a failure no command foresaw (``turnkit.cli.main``).
"""

from __future__ import annotations

import inspect
import re
import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from turnkit.cli.session import Session, open_records, open_session
from turnkit.errors import TurnkitError

console = Console(highlight=False)

USAGE = 2
"""Exit status of a mistake in how the command was used (an option, a URL, an id)."""
ALREADY_DECIDED = 3
"""Exit status of a decision on a confirmation decided before: nothing ran now."""
FAILED = 1
"""Exit status of a genuine failure: a write that ran and answered an error, and the like."""
FAILURES = frozenset({"tool_error", "timeout", "internal_error", "outcome_unknown"})
"""The error codes of an answer for which the write ran (or may have) and failed; every other
code is a refusal (``USAGE``): a rule said no before anything ran."""


def answer_status(code: str) -> int:
    """The exit status of an answer that ended with error ``code``: ``FAILED`` when the write ran
    and failed (``FAILURES``), ``USAGE`` when it was refused.

    Examples:
        >>> answer_status("forbidden"), answer_status("tool_error")
        (2, 1)
    """
    return FAILED if code in FAILURES else USAGE


INTERRUPTED = 130
"""Exit status of a command stopped by Ctrl-C (128 + SIGINT, as shells report it)."""
STOPPED = "stopped (Ctrl-C)"
"""The one line a command stopped by Ctrl-C ends with, unless it said goodbye itself."""


class Interrupted(SystemExit):
    """Ctrl-C, told already by the command (the chat's closing line): ``main`` adds nothing and
    the command ends with ``INTERRUPTED``."""

    def __init__(self) -> None:
        super().__init__(INTERRUPTED)


Db = Annotated[
    str | None,
    typer.Option(
        metavar="FILE|URL",
        help="Storage: a SQLite file (default .turnkit/turnkit.sqlite) or postgresql://...",
    ),
]
Modules = Annotated[
    list[str] | None,
    typer.Option(
        "--module",
        metavar="PKG.MOD:OBJ",
        help="A module of your tools as package.module:object, a class or factory is called"
        " (repeatable).",
    ),
]
Upstreams = Annotated[
    list[str] | None,
    typer.Option(
        "--upstream",
        metavar="NAME=URL|NAME=COMMAND|FILE.toml",
        help="An MCP server you don't own, as a module named NAME: its Streamable HTTP URL, or the"
        " command that starts it on stdio, or a .toml file of upstreams (repeatable).",
    ),
]
EntryPoints = Annotated[
    bool, typer.Option("--entry-points", help="Also load modules of the turnkit.modules group.")
]
Demo = Annotated[
    bool,
    typer.Option(
        "--demo",
        help="Load the demo catalogue (its user: demo); never loaded without this flag.",
    ),
]
Catalogue = Annotated[
    str | None,
    typer.Option(
        metavar="FILE",
        help="With --demo: the demo catalogue's SQLite file (default .turnkit/catalogue.sqlite).",
    ),
]
User = Annotated[str, typer.Option(metavar="USER", help="The signed-in user the agent acts for.")]
Grants = Annotated[
    list[str] | None,
    typer.Option("--grant", metavar="PERMISSION", help="A permission the user holds (repeatable)."),
]
Permissions = Annotated[
    str | None,
    typer.Option(
        "--permissions",
        metavar="PKG.MOD:FUNC",
        help="Your application's permission provider as package.module:provider, a function"
        " (caller) -> permissions; default: nobody holds one (with --demo, the demo user holds"
        " the demo's).",
    ),
]
GrantsOrPermissions = Annotated[
    str | None,
    typer.Option(
        "--permissions",
        metavar="PKG.MOD:FUNC",
        help="Your application's permission provider as package.module:provider, a function"
        " (caller) -> permissions; default: --grant (and, with --demo, the demo user's).",
    ),
]
"""``--permissions`` of a command that also takes ``--grant`` (its help names it)."""
HELP_MARKUP = None
"""Every ``typer.Typer`` here takes ``rich_markup_mode=HELP_MARKUP``: click's plain help, which
reflows each paragraph of a docstring to the terminal (Typer's rich help keeps the source's line
breaks in the command list) and prints no ``<bool>`` beside a flag (``tests/test_cli_help.py``)."""


def first_sentence(text: str | None) -> str:
    """A command's help as its group lists it: the first sentence of its first paragraph, whole."""
    paragraph = " ".join(inspect.cleandoc(text or "").split("\n\n")[0].split())
    end = paragraph.find(". ")
    return paragraph if end < 0 else paragraph[: end + 1]


class HelpGroup(TyperGroup):
    """A command group whose list gives each command's first sentence whole, wrapped to the
    terminal: click cuts it at about 45 characters with "..." ("Serve your tools to API-key
    callers: REST at /v1, MCP at..."). Every ``typer.Typer`` here takes ``cls=HelpGroup``."""

    def format_commands(self, ctx: Any, formatter: Any) -> None:  # Typer's own click's types
        rows = [
            (name, first_sentence(command.short_help or command.help))
            for name in self.list_commands(ctx)
            if (command := self.get_command(ctx, name)) is not None and not command.hidden
        ]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


Act = Annotated[
    list[str] | None,
    typer.Option(
        "--act",
        metavar="MODULE",
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


def need_tools(
    modules: list[str] | None,
    entry_points: bool,
    demo: bool,
    example: str,
    upstreams: list[str] | None = None,
) -> None:
    """End a command that was given no tools to load (``USAGE``): the demo is loaded only on
    request, never in place of the application's own modules. ``example`` is the command with
    ``--demo``, shown as the way to the demo catalogue."""
    if modules or entry_points or demo or upstreams:
        return
    console.print(
        "[red]no tools to load[/]: pass --module package.module:object (your tools, as your"
        " application declares them), --upstream NAME=URL (an MCP server's), --entry-points, or"
        " --demo for the demo catalogue"
        f" ({escape(example)}); `turnkit demo` shows the whole flow offline"
    )
    raise typer.Exit(USAGE)


Given = tuple[str, str | bool | list[str] | None]
"""An option as a person gave it: its flag, and its value (None, False or [] when not given)."""


def repeated(command: str, given: list[Given]) -> str:
    """``command`` with the options a person gave, for a hint to repeat (``continue with: ...``):
    each quoted for a POSIX shell (``shlex``), a True flag alone, a list once per item, what was
    not given left out. The caller hides a secret before (a database URL's password:
    ``ledger.urls.shown``); no turnkit option carries an API key.

    Examples:
        >>> repeated("turnkit chat", [("--demo", True), ("--model", "llama3.1:8b"),
        ...                           ("--grant", ["a b", "c"]), ("--db", None)])
        "turnkit chat --demo --model llama3.1:8b --grant 'a b' --grant c"
    """
    words = command.split()
    for flag, value in given:
        if value is True:
            words.append(flag)
        elif isinstance(value, str):
            words += [flag, value]
        elif isinstance(value, list):
            for item in value:
                words += [flag, item]
    return shlex.join(words)


def session(
    db: str | None,
    modules: list[str] | None,
    entry_points: bool,
    demo: bool,
    catalogue: str | None,
    user: str,
    grants: list[str] | None,
    act: list[str] | None,
    permissions: str | None = None,
    upstreams: list[str] | None = None,
) -> Session:
    """The session of a command, its warnings shown; a mistake ends the command (``USAGE``)."""
    with friendly():
        opened = open_session(
            upstreams=upstreams or [],
            db=db,
            modules=modules or [],
            entry_points=entry_points,
            demo=demo,
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


PERIOD_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
"""The units a period takes (``--expires-in``, ``--since``): ``90s``, ``30m``, ``12h``, ``7d``,
``2w``."""
PERIODS = ", ".join(f"{n}{unit}" for n, unit in zip((90, 30, 12, 7, 2), PERIOD_UNITS, strict=True))
"""One example of each unit of ``PERIOD_UNITS``, for help texts and messages, so that the units a
help names are the units the parser takes: ``90s, 30m, 12h, 7d, 2w``."""
_PERIOD = re.compile(rf"\s*(\d{{1,6}})\s*([{''.join(PERIOD_UNITS)}])\s*")


def period_seconds(text: str) -> int | None:
    """The seconds of a period written as a whole number and a unit (``PERIOD_UNITS``); None
    when ``text`` is not one, or is zero (each option says so in its own words).

    Examples:
        >>> period_seconds("2h"), period_seconds("7D"), period_seconds("0m"), period_seconds("x")
        (7200, 604800, None, None)
    """
    match = _PERIOD.fullmatch(text.lower())
    if match is None or int(match[1]) == 0:
        return None
    return int(match[1]) * PERIOD_UNITS[match[2]]
