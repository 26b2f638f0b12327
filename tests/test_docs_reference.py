"""The site's reference pages leave nothing out: every command, every endpoint, every public name.

The CLI and REST pages are written at build time by ``docs/_hooks/reference.py`` (imported here by
its path: the docs folder is no package); the Python API pages are ``:::`` directives that
mkdocstrings fills from the docstrings.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

import pytest
import typer
from mkdocs.config import load_config
from mkdocs.structure.files import Files

import turnkit
from test_test_imports import PUBLIC_PACKAGES
from turnkit.cli import app  # internal: the Typer app whose commands the CLI page must list

ROOT = Path(__file__).parent.parent
DOCS = ROOT / "docs"
API_PAGES = [DOCS / "reference" / "api.md", *sorted((DOCS / "reference" / "api").glob("*.md"))]
PACKAGES = (  # the public packages besides turnkit itself, and the executor's answers
    *(package for package in PUBLIC_PACKAGES if package != "turnkit"),
    "turnkit.executor",  # its answers: what Executor.call and decide return
)


@pytest.fixture(scope="module")
def hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("reference_hooks", DOCS / "_hooks/reference.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def openapi(hooks) -> dict:
    return hooks.openapi_document()


def _commands(command, ctx: typer.Context):
    """(command path, command) for the app and every command and sub-command in it."""
    yield ctx.command_path, command
    for name in getattr(command, "list_commands", lambda ctx: [])(ctx):
        sub = command.get_command(ctx, name)
        yield from _commands(sub, typer.Context(sub, info_name=name, parent=ctx))


def _sections(markdown: str) -> dict[str, str]:
    """The CLI page's text under each command's heading, by command path."""
    parts = re.split(r"^#{2,3} `([^`]+)`.*$", markdown, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_every_command_is_on_the_cli_page_with_its_usage_and_options(hooks):
    markdown = hooks.render_cli()
    sections = _sections(markdown)
    root = typer.main.get_command(app)
    commands = list(_commands(root, typer.Context(root, info_name="turnkit")))
    assert len(commands) > 20  # the sub-commands are walked too
    assert set(sections) == {path for path, _ in commands}
    for path, command in commands:
        assert f"Usage: {path}" in sections[path]
        for param in command.params:
            for name in [*getattr(param, "opts", []), *getattr(param, "secondary_opts", [])]:
                if name.startswith("-"):
                    assert f"`{name}`" in sections[path], (path, name)


def test_flags_are_told_by_their_names_never_as_a_bool_metavar(hooks):
    markdown = hooks.render_cli()
    assert "<bool>" not in markdown
    assert "&lt;bool&gt;" not in markdown
    serve = _sections(markdown)["turnkit serve"]
    assert "| `--metrics` / `--no-metrics` | flag | `--metrics` |" in serve
    assert "| `--port` | int range | `8080` |" in serve


def test_every_endpoint_is_on_the_rest_page(hooks, openapi):
    markdown = hooks.render_rest(openapi)
    operations = [(m, p) for p, methods in openapi["paths"].items() for m in methods]
    assert len(operations) >= 10
    for method, path in operations:
        assert f"### `{method.upper()} {path}`" in markdown
    for name in openapi["components"]["schemas"]:
        assert f"{{ #schema-{name.lower()} }}" in markdown
    assert "`GET /v1/audit` { #get-v1-audit }" in markdown
    assert "scope `system.audit:read`" in markdown


def test_the_site_gets_the_openapi_document_the_rest_page_links(hooks, openapi):
    config = load_config(str(ROOT / "mkdocs.yml"))  # mkdocs.yml's hooks, as mkdocs runs them
    files = config.plugins.on_files(Files([]), config=config)
    served = files.get_file_from_path(hooks.OPENAPI_FILE)
    assert served is not None
    assert json.loads(served.content_string) == openapi
    assert "(../openapi.json)" in hooks.render_rest(openapi)


def test_the_reference_pages_carry_the_markers_and_the_hook_is_configured(hooks):
    assert hooks.CLI_MARKER in (DOCS / "reference" / "cli.md").read_text()
    assert hooks.REST_MARKER in (DOCS / "reference" / "rest.md").read_text()
    assert "docs/_hooks/reference.py" in (ROOT / "mkdocs.yml").read_text()


def _directives() -> set[str]:
    return {
        found
        for page in API_PAGES
        for found in re.findall(r"^::: (\S+)$", page.read_text(), flags=re.MULTILINE)
    }


def test_every_public_name_is_on_the_api_pages():
    directives = _directives()
    missing = [name for name in turnkit.__all__ if f"turnkit.{name}" not in directives]
    for package in PACKAGES:
        module = importlib.import_module(package)
        for name in module.__all__:
            same = name in turnkit.__all__ and getattr(turnkit, name) is getattr(module, name)
            if f"{package}.{name}" not in directives and not same:
                missing.append(f"{package}.{name}")
    assert missing == []


def test_every_directive_names_a_public_object_and_every_api_page_is_in_the_nav():
    for directive in _directives():
        package, name = directive.rsplit(".", 1)
        assert name in importlib.import_module(package).__all__, directive
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in API_PAGES:
        assert str(page.relative_to(DOCS)) in nav, page
