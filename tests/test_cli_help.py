"""Every ``turnkit`` command's ``--help``: no ``<bool>`` beside a flag, no option it lacks named
(``--grant``), paragraphs reflowed to the terminal, and the period units it names the parser's.

Reaches ``turnkit.cli.options`` for the period grammar the help texts must agree with.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import click
import pytest
import typer.main
from typer.testing import CliRunner

from turnkit.cli import app
from turnkit.cli.options import PERIOD_UNITS, period_seconds


def commands() -> Iterator[tuple[str, click.Command, str]]:
    """Each command and group of the app: its path, itself and its ``--help`` (80 columns)."""
    runner = CliRunner(env={"COLUMNS": "80", "TERM": "dumb", "NO_COLOR": "1"})

    def walk(command: click.Command, path: list[str]) -> Iterator:
        shown = runner.invoke(app, [*path, "--help"])
        assert shown.exit_code == 0, shown.output
        yield " ".join(["turnkit", *path]), command, shown.output
        for name, sub in getattr(command, "commands", {}).items():
            yield from walk(sub, [*path, name])

    yield from walk(typer.main.get_command(app), [])


ALL = list(commands())


def options_of(command: click.Command) -> set[str]:
    return {name for param in command.params for name in (*param.opts, *param.secondary_opts)}


EACH = pytest.mark.parametrize(("path", "command", "text"), ALL, ids=[path for path, _, _ in ALL])


@EACH
def test_help_shows_no_bool_metavar_beside_a_flag(path, command, text):
    assert "<bool>" not in text


@EACH
def test_help_names_no_grant_option_the_command_lacks(path, command, text):
    if "--grant" in text:
        assert "--grant" in options_of(command), f"{path} --help names --grant, which it lacks"


def test_a_docstring_paragraph_is_reflowed_not_broken_where_its_source_line_ends():
    texts = {path: text for path, _, text in ALL}
    listed = [line.strip(" │") for line in texts["turnkit"].splitlines()]  # rich: in a box
    assert not [line for line in listed if line.startswith("(people approve")], texts["turnkit"]
    flat = " ".join(texts["turnkit serve"].split())
    assert "the web inbox at /ui/ (people approve held writes)." in flat


PERIOD_OPTIONS = [
    ("turnkit keys create", "--expires-in"),
    ("turnkit report approvals", "--since"),
    ("turnkit audit", "--since"),
    ("turnkit audit", "--until"),
]


@pytest.mark.parametrize(("path", "option"), PERIOD_OPTIONS)
def test_a_period_option_names_each_unit_the_parser_takes_and_only_those(path, option):
    (command,) = [command for found, command, _ in ALL if found == path]
    (param,) = [p for p in command.params if option in p.opts]
    examples = re.findall(r"\b(\d+)([a-z])\b", param.help or "")
    assert {unit for _, unit in examples} == set(PERIOD_UNITS), param.help
    for number, unit in examples:
        assert period_seconds(f"{number}{unit}") == int(number) * PERIOD_UNITS[unit]


@EACH
def test_a_group_lists_each_commands_first_sentence_whole_not_cut_with_dots(path, command, text):
    """click cuts a command's line at about 45 characters ("REST at /v1, MCP at..."): a newcomer
    reading ``turnkit --help`` saw half of what each command does."""
    listing = text.partition("Commands:")[2]
    assert "..." not in listing, f"{path} --help cuts a command's line:\n{listing}"
    for name, sub in getattr(command, "commands", {}).items():
        first = " ".join((sub.help or "").split()).split(". ")[0].rstrip(".")
        assert first in " ".join(listing.split()), f"{path} --help lists {name} without {first!r}"
