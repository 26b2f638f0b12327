"""What an upstream offers now: its last ``tools/list``, and what changed since the one before.

The listing is read again on ``McpUpstream.refresh()``, after the upstream said its list
changed (``notifications/tools/list_changed``, when its transport delivers one), after each new
session, and before an approved write runs: a call whose declared input schema is no longer
the upstream's is refused and never sent (``handler.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcp import types

from turnkit.upstream.connection import Connection

__all__ = ["Listing", "ToolChanges"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolChanges:
    """What a new listing of an upstream changed, by upstream tool name; falsy when nothing."""

    added: tuple[str, ...] = ()
    """Tools listed now that were not before."""
    removed: tuple[str, ...] = ()
    """Tools no longer listed."""
    changed: tuple[str, ...] = ()
    """Tools listed before and now, differently (schema, hints, description or title)."""

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)


class Listing:
    """The upstream's tools as last listed (None before the first listing)."""

    def __init__(self, connection: Connection, timeout: float) -> None:
        self._connection = connection
        self._timeout = timeout
        self.tools: Mapping[str, types.Tool] | None = None
        """The last listing by upstream name; replaced whole, never changed in place."""
        self.stale = False
        """The upstream said its list changed since: read it again before trusting it."""

    def mark_stale(self) -> None:
        """The upstream said its list changed: read it again before the next call."""
        self.stale = True

    async def relist(self) -> ToolChanges:
        """Read the listing again (on the connection's loop); what changed."""
        tools = await self._connection.list_tools(self._timeout)
        now = {tool.name: tool for tool in tools}
        before = self.tools or {}
        self.tools, self.stale = now, False
        return ToolChanges(
            added=tuple(name for name in now if name not in before),
            removed=tuple(name for name in before if name not in now),
            changed=tuple(
                name for name in now if name in before and _seen(now[name]) != _seen(before[name])
            ),
        )


def _seen(tool: types.Tool) -> dict[str, Any]:
    return tool.model_dump(mode="json", exclude={"meta"})
