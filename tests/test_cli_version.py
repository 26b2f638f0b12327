"""``turnkit --version`` says which turnkit runs, and does nothing else."""

from __future__ import annotations

from typer.testing import CliRunner

from turnkit import __version__
from turnkit.cli import app  # internal: the console script's Typer app, run in process


def test_version_prints_the_package_version_and_exits_0():
    done = CliRunner().invoke(app, ["--version"])
    assert done.exit_code == 0
    assert done.output.strip() == f"turnkit {__version__}"


def test_version_comes_before_any_command_and_the_bare_command_still_shows_help():
    assert CliRunner().invoke(app, ["--version", "demo"]).output.strip() == f"turnkit {__version__}"
    bare = CliRunner().invoke(app, [])
    assert "Usage: turnkit" in bare.output
    assert "--version" in bare.output
