"""``turnkit settings list|set|unset``: the operator's overrides in the ledger, said out loud.

The only way a command changes a setting for good. Each change prints what it was and what it is
now; a value that breaks the setting's rule is refused (the executor would ignore it, with a log
line, at every call).
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from turnkit.cli.options import HELP_MARKUP, USAGE, Db, HelpGroup, console, records
from turnkit.registry.settings import Settings

app = typer.Typer(
    help="The settings in force, and the operator's overrides.",
    no_args_is_help=True,
    rich_markup_mode=HELP_MARKUP,
    cls=HelpGroup,
)

Name = Annotated[str, typer.Argument(help="The setting, e.g. api_session_write_modules.")]
NAMES = [field.name for field in dataclasses.fields(Settings)]


@app.command("list")
def list_(db: Db = None) -> None:
    """Every setting: its default, the ledger's override, and the value in force."""
    opened = records(db)
    try:
        overrides = opened.storage.ledger.settings()
        defaults, now = Settings(), Settings().merged(overrides)
        table = Table(title="settings", title_justify="left")
        for column in ("setting", "default", "override", "in force"):
            table.add_column(column, overflow="fold")
        for name in NAMES:
            override = _shown(overrides[name]) if name in overrides else "-"
            table.add_row(name, _shown(getattr(defaults, name)), override,
                          _shown(getattr(now, name)))  # fmt: skip
        console.print(table)
    finally:
        opened.close()


# a value may look like an option (-1): it is the value, and the setting's rule answers it
@app.command("set", context_settings={"ignore_unknown_options": True})
def set_(
    name: Name,
    value: Annotated[str, typer.Argument(help="JSON: 50, 1.5, '[\"shop\"]'; else a string.")],
    db: Db = None,
) -> None:
    """Override a setting in the ledger: every later call and turn reads it."""
    parsed = _parsed(value)
    try:
        checked = dataclasses.replace(Settings(), **{_known(name): parsed})
    except (TypeError, ValueError) as exc:
        console.print(f"[red]{escape(str(exc))}[/]\nnothing was changed")
        raise typer.Exit(USAGE) from None
    stored = _stored(getattr(checked, name))
    opened = records(db)
    try:
        before = opened.storage.ledger.settings().get(name)
        opened.storage.ledger.set_setting(name, stored)
    finally:
        opened.close()
    was = "the default" if before is None else _shown(before)
    console.print(f"{name}: {escape(was)} -> {escape(_shown(stored))}")


@app.command()
def unset(name: Name, db: Db = None) -> None:
    """Remove the ledger's override of a setting: its default is in force again."""
    opened = records(db)
    try:
        before = opened.storage.ledger.settings().get(_known(name))
        opened.storage.ledger.clear_setting(name)
    finally:
        opened.close()
    if before is None:
        console.print(f"{name} had no override: nothing changed")
    else:
        default = _shown(getattr(Settings(), name))
        console.print(f"{name}: {escape(_shown(before))} -> the default ({escape(default)})")


def _known(name: str) -> str:
    if name not in NAMES:
        console.print(f"[red]no setting {name!r}[/]; the settings are: {', '.join(NAMES)}")
        raise typer.Exit(USAGE)
    return name


def _parsed(value: str) -> Any:
    """``value`` as JSON, else the string as typed. A number that is not finite (``NaN``,
    ``Infinity``, ``1e999``) is no number here: it stays a string, which no setting takes."""
    try:
        return json.loads(value, parse_constant=_not_finite, parse_float=_finite)
    except ValueError:
        return value


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{text} is not a finite number")
    return number


def _not_finite(text: str) -> float:
    raise ValueError(f"{text} is not a finite number")


def _stored(value: Any) -> Any:
    """A setting's value as JSON data (a set of modules becomes a sorted list)."""
    return sorted(value) if isinstance(value, frozenset | set) else value


def _shown(value: Any) -> str:
    return json.dumps(_stored(value))
