"""Govern tools you do not own: an upstream MCP server as a turnkit module.

``McpUpstream`` connects with the official ``mcp`` client (Streamable HTTP or stdio), lists the
server's tools and declares one turnkit tool each, so they get what every turnkit tool gets:
per-caller visibility, the schema check, holds for a person, exactly-once approvals, rate
limits, the audit and traces, through every door. Its handlers call the upstream's
``tools/call``; the upstream sees one client per process.

Above ``registry/`` (and ``errors``), beside ``ledger/`` and ``observe/``; no LangGraph or
LangChain. Needs the ``mcp`` SDK (the ``upstream`` or ``server`` extra).
"""

from __future__ import annotations

try:
    import mcp  # noqa: F401  # the SDK this package stands on
except ImportError as missing:  # pragma: no cover - an install without the extra
    raise ImportError(
        "turnkit.upstream needs the mcp SDK: pip install 'turnkit[upstream]'"
    ) from missing

from turnkit.upstream.listing import ToolChanges
from turnkit.upstream.module import McpUpstream

__all__ = ["McpUpstream", "ToolChanges"]
