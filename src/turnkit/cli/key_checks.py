"""What ``turnkit keys create`` warns about: a key that does not do what its maker meant.

Each check returns the warnings as lines, never raises: the key is made anyway, as asked.

- With the tools of the loaded modules: a scope no tool uses, a tool in ``--allow`` no module
  declares, and a key that may both call a write tool (a tool not ``read_only``, by its scope)
  and decide held writes (``DECIDE_SCOPE``).
- Without them, only what the scopes alone show: a ``system.*`` scope turnkit does not know, and
  write plus decide when a scope's action is ``write`` — by its name only, and said so.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from turnkit.executor.confirmations import DECIDE_SCOPE
from turnkit.ledger.audit import AUDIT_SCOPE
from turnkit.registry.tool import Tool

__all__ = ["SYSTEM_SCOPES", "UNCHECKED", "key_warnings"]

SYSTEM_SCOPES = frozenset({DECIDE_SCOPE, AUDIT_SCOPE})
"""The ``system.*`` scopes turnkit itself gives a meaning (no tool declares them)."""
UNCHECKED = (
    "no --module, --entry-points or --demo: the scopes and --allow were checked against no"
    " tools (only turnkit's own system.* scopes are known here)"
)
"""The line that says how little was checked when no module was given."""
SHOWN = 4
"""The most names one warning lists."""


def key_warnings(
    scopes: Collection[str], allow: Collection[str] | None, tools: Sequence[Tool] | None
) -> list[str]:
    """The warnings for a key with ``scopes`` and ``allow`` (None: every tool), checked against
    ``tools`` (those of the loaded modules), or against the scopes' names alone when None."""
    if tools is None:
        return _unknown_system_scopes(scopes) + _writes_and_decides_by_name(scopes)
    return (
        _unknown_scopes(scopes, tools)
        + _unknown_tools(allow, tools)
        + _writes_and_decides(scopes, allow, tools)
    )


def _unknown_scopes(scopes: Collection[str], tools: Sequence[Tool]) -> list[str]:
    used = {tool.scope for tool in tools if tool.scope is not None}
    return [
        f"no loaded tool uses the scope {scope!r}: it gives the key nothing (the known scopes:"
        f" {_listed(sorted(used | SYSTEM_SCOPES))})"
        for scope in sorted(set(scopes) - used - SYSTEM_SCOPES)
    ]


def _unknown_tools(allow: Collection[str] | None, tools: Sequence[Tool]) -> list[str]:
    names = {tool.name for tool in tools}
    return [
        f"no loaded module declares the tool {name!r} (--allow): the key can never call it"
        for name in sorted(set(allow or ()) - names)
    ]


def _writes_and_decides(
    scopes: Collection[str], allow: Collection[str] | None, tools: Sequence[Tool]
) -> list[str]:
    if DECIDE_SCOPE not in scopes:
        return []
    writes = [
        tool.name
        for tool in tools
        if tool.is_write and tool.scope in scopes and (allow is None or tool.name in allow)
    ]
    return [_risky(f"may call the write tools {_listed(writes)}")] if writes else []


def _unknown_system_scopes(scopes: Collection[str]) -> list[str]:
    return [
        f"turnkit knows no scope {scope!r}: the system scopes a key may carry are"
        f" {_listed(sorted(SYSTEM_SCOPES))}"
        for scope in sorted(set(scopes) - SYSTEM_SCOPES)
        if scope.startswith("system.")
    ]


def _writes_and_decides_by_name(scopes: Collection[str]) -> list[str]:
    if DECIDE_SCOPE not in scopes:
        return []
    writes = sorted(
        scope
        for scope in scopes
        if not scope.startswith("system.") and scope.rpartition(":")[2] == "write"
    )
    if not writes:
        return []
    return [_risky(f"carries {_listed(writes)}, by its name a scope of write tools,")]


def _risky(writes: str) -> str:
    return (
        f"the key {writes} and may decide held writes ({DECIDE_SCOPE!r}): a client holding it"
        " could approve its own held writes, and no person's yes would be needed. Make two keys"
        f" instead: one for the client, without {DECIDE_SCOPE!r}, and one for the person who"
        f" approves, with {DECIDE_SCOPE!r} and no write scope (the web inbox at /ui/ signs in"
        " with it)"
    )


def _listed(names: Sequence[str]) -> str:
    shown = ", ".join(repr(name) for name in names[:SHOWN])
    return shown + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")
