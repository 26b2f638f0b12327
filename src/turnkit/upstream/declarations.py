"""An upstream's MCP tool as a turnkit declaration (a ``Tool`` field mapping).

- **Name**: ``<key>.<name>``, the upstream's name in turnkit's form: camelCase split, any run of
  other characters one underscore, lowercase (``readFile`` and ``read-file``: ``read_file``); a
  single word gets ``call_`` before it (``search``: ``call_search``), since a turnkit name is
  ``<verb>_<noun>``. ``tools={"search": {"name": "search_files"}}`` chooses another. A name
  that still does not fit, or that another tool of the upstream took first, is left out.
- **Input schema**: the MCP ``inputSchema``, its root ``$schema`` (the dialect) dropped; a
  schema outside turnkit's subset leaves the tool out, naming the keyword.
- **Annotations** (MCP hints, with the spec's defaults): ``readOnlyHint: true`` is a read;
  otherwise a write, ``destructive`` unless ``destructiveHint: false``; ``idempotentHint``
  as given (default false); ``openWorldHint`` as given (default true).
- **Rights**: scope ``<key>.tools:read`` for a read and ``<key>.tools:write`` for a write;
  permission ``<key>.read`` / ``<key>.write``. ``danger`` None: a write is held for a
  signed-in user's agent, as every turnkit write; ``tools=`` sets ``danger="always"`` to hold
  it for API keys too.

``tools=`` settings (by exact name, else the first fnmatch pattern) replace any of these.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from mcp import types

from turnkit.upstream.config import ToolSettings

__all__ = ["declaration", "input_schema_of", "tool_name"]

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_OTHER = re.compile(r"[^a-z0-9]+")
_WORD = re.compile(r"[a-z][a-z0-9]*(_[a-z0-9]+)+")


def tool_name(upstream: str) -> str | None:
    """The turnkit name (after the key) of the upstream tool ``upstream``, or None when none
    fits.

    Examples:
        >>> [tool_name(n) for n in ("read_file", "readFile", "git-log", "search", "2go", "")]
        ['read_file', 'read_file', 'git_log', 'call_search', None, None]
    """
    name = _OTHER.sub("_", _CAMEL.sub("_", upstream).lower()).strip("_")
    if not name[:1].isalpha():
        return None
    if "_" not in name:
        name = f"call_{name}"
    return name if _WORD.fullmatch(name) else None


def input_schema_of(tool: types.Tool) -> dict[str, Any]:
    """The tool's input schema as turnkit declares it: the upstream's, without a root
    ``$schema``."""
    schema = dict(tool.input_schema)
    schema.pop("$schema", None)
    return schema


def annotations_of(tool: types.Tool) -> dict[str, bool]:
    """The MCP hints as turnkit annotations, with the spec's defaults for missing hints."""
    hints = tool.annotations or types.ToolAnnotations()
    read_only = hints.read_only_hint is True
    return {
        "read_only": read_only,
        "destructive": not read_only and hints.destructive_hint is not False,
        "idempotent": hints.idempotent_hint is True,
        "open_world": hints.open_world_hint is not False,
    }


def declaration(
    key: str,
    name: str,
    tool: types.Tool,
    settings: ToolSettings,
    handler: Callable[..., Any],
) -> dict[str, Any]:
    """The declaration of upstream ``key``'s ``tool`` under ``<key>.<name>``."""
    annotations = annotations_of(tool)
    fields: Mapping[str, Any] = settings.fields
    if "read_only" in fields:
        read_only = fields["read_only"]
        annotations["read_only"] = read_only
        if read_only is True:
            annotations["destructive"] = False
    write = annotations["read_only"] is not True
    access = "write" if write else "read"
    hint_title = tool.annotations.title if tool.annotations is not None else None
    declared: dict[str, Any] = {
        "name": f"{key}.{name}",
        "title": tool.title or hint_title,
        "description": tool.description or "",
        "input_schema": input_schema_of(tool),
        "annotations": annotations,
        "scope": f"{key}.tools:{access}",
        "permission": f"{key}.{access}",
        "handler": handler,
    }
    declared.update({field: value for field, value in fields.items() if field != "read_only"})
    if declared.get("audience") == "public":  # a public tool has neither, unless told
        for field in ("scope", "permission"):
            if field not in fields:
                declared[field] = None
    return declared
