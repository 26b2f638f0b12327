"""MkDocs hooks: the CLI and REST reference pages, generated from the code on every build.

``<!-- turnkit:cli -->`` in a page becomes every ``turnkit`` command, from the Typer app, as
``--help`` tells it; ``<!-- turnkit:rest -->`` becomes every REST endpoint, from the OpenAPI
document of the app ``turnkit serve --demo`` serves, and that document is added to the site as
``openapi.json`` (a generated file, so the page's link to it is checked like any other).
"""

from __future__ import annotations

import html
import inspect
import json
import re
import tempfile
from pathlib import Path
from typing import Any

import typer
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page
from typer.core import TyperArgument, TyperGroup, TyperOption

CLI_MARKER = "<!-- turnkit:cli -->"
REST_MARKER = "<!-- turnkit:rest -->"
OPENAPI_FILE = "openapi.json"
_EXTRAS = re.compile(r"\s{2}\[([^\[\]]*)\]$")  # click's "  [default: x; 1<=x<=64]" after a help
_SCOPE = re.compile(r"[Nn]eeds the scope ``([^`]+)``")
_spec: dict[str, Any] | None = None  # this build's OpenAPI document


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Build the OpenAPI document once per build and add it to the site as ``openapi.json``."""
    global _spec
    _spec = openapi_document()
    files.append(File.generated(config, OPENAPI_FILE, content=json.dumps(_spec, indent=2)))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Replace the markers with the references they name."""
    if CLI_MARKER in markdown:
        markdown = markdown.replace(CLI_MARKER, render_cli())
    if REST_MARKER in markdown:
        markdown = markdown.replace(REST_MARKER, render_rest(_spec or openapi_document()))
    return markdown


def _text(value: str) -> str:
    """``value`` as literal Markdown on one line (a table cell)."""
    escaped = html.escape(" ".join(value.split()), quote=False)
    return re.sub(r"([\\*_\[\]|`])", r"\\\1", escaped)


# --- the CLI ---------------------------------------------------------------------------------


def render_cli() -> str:
    """Every ``turnkit`` command and sub-command: usage, help, options and arguments."""
    from turnkit.cli import app

    root = typer.main.get_command(app)
    return "\n".join(_command(root, typer.Context(root, info_name="turnkit")))


def _command(command: Any, ctx: typer.Context) -> list[str]:
    path = ctx.command_path
    depth = path.count(" ")
    lines = [f"{'#' * (2 if depth < 2 else 3)} `{path}` {{ #{path.replace(' ', '-')} }}", ""]
    lines += ["```text", command.get_usage(ctx).strip(), "```", ""]
    lines += [inspect.cleandoc(command.help or ""), ""]
    shown = [param for param in command.params if not getattr(param, "hidden", False)]
    arguments = [param for param in shown if isinstance(param, TyperArgument)]
    options = [param for param in shown if isinstance(param, TyperOption)]
    if arguments:
        lines += ["| Argument | Type | Description |", "| --- | --- | --- |"]
        for argument in arguments:
            required = "" if argument.required else " Optional."
            kind = argument.display_type(ctx).strip("<>")
            lines.append(f"| `{argument.name}` | {kind} | {_text(argument.help or '')}{required} |")
        lines.append("")
    if options:
        lines += ["| Option | Type | Default | Description |", "| --- | --- | --- | --- |"]
        lines += [_option(option, ctx) for option in options]
        lines.append("")
    if isinstance(command, TyperGroup):
        names = command.list_commands(ctx)
        found = [(name, command.get_command(ctx, name)) for name in names]
        subs = [(name, sub) for name, sub in found if sub is not None and not sub.hidden]
        lines += ["| Command | What it does |", "| --- | --- |"]
        for name, sub in subs:
            anchor = f"{path} {name}".replace(" ", "-")
            summary = _text(sub.get_short_help_str(limit=200))
            lines.append(f"| [`{path} {name}`](#{anchor}) | {summary} |")
        lines.append("")
        for name, sub in subs:
            lines += _command(sub, typer.Context(sub, info_name=name, parent=ctx))
    return lines


def _option(option: TyperOption, ctx: typer.Context) -> str:
    """A table row: the option's names, type, default and help (with click's other notes)."""
    names = " / ".join(
        ", ".join(f"`{name}`" for name in group)
        for group in (option.opts, option.secondary_opts)
        if group
    )
    record = option.get_help_record(ctx)
    help_text = record[1] if record else ""
    notes: list[str] = []
    default = ""
    if found := _EXTRAS.search(help_text):
        help_text = help_text[: found.start()]
        for note in found.group(1).split("; "):
            if note.startswith("default: "):
                default = f"`{note.removeprefix('default: ')}`"
            else:
                notes.append(note)
    if option.is_flag:  # on or off, said with the flag's own name: never a <bool> metavar
        kind = "flag"
        default = f"`{option.opts[0]}`" if option.default else ""
        if not option.default and option.secondary_opts:
            default = f"`{option.secondary_opts[0]}`"
    else:
        kind = option.metavar or option.display_type(ctx).strip("<>")
        if option.multiple and kind.startswith("list[") and kind.endswith("]"):
            kind = f"{kind[5:-1]}, repeatable"
    told = _text(help_text) + "".join(f" ({_text(note)})" for note in notes)
    return f"| {names} | {_text(kind)} | {default} | {told} |"


# --- REST ------------------------------------------------------------------------------------


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document of the app ``turnkit serve --demo`` serves (on a ledger in a
    temporary folder, removed after)."""
    from turnkit.demo import demo_executor
    from turnkit.server import create_app

    with tempfile.TemporaryDirectory(prefix="turnkit-docs-") as folder:
        executor = demo_executor(Path(folder) / "catalogue.sqlite")
        try:
            spec: dict[str, Any] = create_app(executor).openapi()
            return spec
        finally:
            executor.close()
            executor.ledger.close()


def _ref(schema: dict[str, Any]) -> str:
    """A schema in a few words: a link to a named one, or its type."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[`{name}`](#schema-{name.lower()})"
    if "anyOf" in schema:
        kinds = [_ref(part) for part in schema["anyOf"] if part.get("type") != "null"]
        return " or ".join(kinds) if kinds else "null"
    if "enum" in schema:
        return " \\| ".join(f"`{value}`" for value in schema["enum"])
    if schema.get("type") == "array":
        return f"array of {_ref(schema.get('items', {}))}"
    kind = str(schema.get("type", "any"))
    return f"{kind} ({schema['format']})" if "format" in schema else kind


def _json_block(title: str, schema: dict[str, Any]) -> list[str]:
    """A collapsed block with ``schema`` as JSON."""
    body = json.dumps(schema, indent=2).splitlines()
    return [f'??? note "{title}"', "    ```json", *(f"    {line}" for line in body), "    ```", ""]


def render_rest(spec: dict[str, Any]) -> str:
    """Every path and method of ``spec``: summary, description, scope, parameters, request body
    and responses; then the named schemas."""
    schemes = spec.get("components", {}).get("securitySchemes", {})
    info = spec["info"]
    lines = [f"{info['title']} {info['version']}: {info.get('summary', '')}."]
    lines += ["", f"The OpenAPI document: [`openapi.json`](../{OPENAPI_FILE}).", ""]
    for name, scheme in schemes.items():
        lines += [f"**Authentication** (`{name}`): {scheme.get('description', scheme['type'])}", ""]
    by_tag: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, methods in spec["paths"].items():
        for method, operation in methods.items():
            tag = (operation.get("tags") or ["other"])[0]
            by_tag.setdefault(tag, []).append((path, method, operation))
    for tag, operations in by_tag.items():
        lines += [f"## {tag.capitalize()}", ""]
        for path, method, operation in operations:
            lines += _operation(path, method, operation)
    lines += ["## Schemas", ""]
    for name, schema in spec.get("components", {}).get("schemas", {}).items():
        lines += [f"### `{name}` {{ #schema-{name.lower()} }}", ""]
        lines += [inspect.cleandoc(schema.get("description", "")), ""]
        lines += _json_block(f"{name} (JSON Schema)", schema)
    return "\n".join(lines)


def _operation(path: str, method: str, operation: dict[str, Any]) -> list[str]:
    anchor = re.sub(r"[^a-z0-9]+", "-", f"{method} {path}".lower()).strip("-")
    lines = [f"### `{method.upper()} {path}` {{ #{anchor} }}", ""]
    lines += [f"**{operation.get('summary', '')}**", ""]
    description = inspect.cleandoc(operation.get("description", ""))
    lines += [description, ""]
    security = [name for need in operation.get("security", []) for name in need]
    auth = f"API key (`{'`, `'.join(security)}`)" if security else "none"
    scope = _SCOPE.search(description)
    lines += [f"**Authentication:** {auth}" + (f"; scope `{scope[1]}`" if scope else ""), ""]
    parameters = operation.get("parameters", [])
    if parameters:
        lines += ["| Parameter | In | Type | Required | Default | Description |"]
        lines += ["| --- | --- | --- | --- | --- | --- |"]
        for parameter in parameters:
            schema = parameter.get("schema", {})
            default = f"`{schema['default']}`" if "default" in schema else ""
            required = "yes" if parameter.get("required") else "no"
            told = _text(parameter.get("description", ""))
            lines.append(
                f"| `{parameter['name']}` | {parameter['in']} | {_ref(schema)} | {required}"
                f" | {default} | {told} |"
            )
        lines.append("")
    body = operation.get("requestBody")
    if body:
        for media, content in body.get("content", {}).items():
            required = "required" if body.get("required") else "optional"
            schema = content.get("schema", {})
            lines += [f"**Request body** ({required}, `{media}`): {_ref(schema)}", ""]
            if "properties" in schema:  # an inline object; a named one is under Schemas
                lines += _json_block("Request body schema", schema)
    lines += ["| Status | Description | Content |", "| --- | --- | --- |"]
    problems: list[str] = []
    for status, response in sorted(operation.get("responses", {}).items()):
        content = response.get("content", {})
        if "application/problem+json" in content:
            problems.append(status)
            continue
        shown = ", ".join(
            f"`{media}`" + (f" {_ref(body['schema'])}" if body.get("schema") else "")
            for media, body in content.items()
        )
        lines.append(f"| {status} | {_text(response.get('description', ''))} | {shown} |")
    if problems:
        lines.append(
            f"| {', '.join(problems)} | A problem document |"
            " `application/problem+json` [`Problem`](#schema-problem) |"
        )
    return [*lines, ""]
