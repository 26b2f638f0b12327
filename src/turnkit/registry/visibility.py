"""Which tools a caller may see now, and why a tool is hidden (``visible_for``; §4 of
docs/architecture.md).

Module enabled; a session sees a module's write tools only when the module is in
``api_session_write_modules`` (the agent's switch, whatever the tool's audience: a public write is
a write the agent would make for a person); public callers see public tools only; key callers need
the tool's scope (and the tool in ``allow`` when it is a list); the permission must be held now.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import Literal, TypeAlias

from turnkit.registry.caller import Caller
from turnkit.registry.settings import Settings
from turnkit.registry.tool import Tool

__all__ = ["Allow", "hidden_reason", "visible"]

Allow: TypeAlias = Literal["all"] | Collection[str]
"""``"all"``, or the registry names a key may call besides its scopes' rule."""


def hidden_reason(
    caller: Caller,
    tool: Tool,
    *,
    permissions: frozenset[str],
    settings: Settings,
    enabled: Callable[[str | None], bool],
    allow: Allow = "all",
) -> str | None:
    """None when ``caller`` may see ``tool`` now, else the reason, worded for the caller."""
    if not enabled(tool.module):
        return f"module {tool.module!r} is disabled"
    if (
        caller.kind == "session"
        and tool.is_write
        and not tool.is_system
        and tool.module not in settings.api_session_write_modules
    ):
        return (
            f"the agent may not act in module {tool.module!r}: it is not in the setting"
            " 'api_session_write_modules'"
        )
    if tool.audience == "public":
        return None
    if caller.kind == "public":
        return "the tool needs an API key or a signed-in session"
    if caller.kind == "key":
        if tool.scope is not None and tool.scope not in caller.scopes:
            return f"the key lacks the scope {tool.scope!r}"
        if allow != "all" and tool.name not in allow:
            return f"the key's allow list does not include {tool.name!r}"
    if tool.permission is not None and tool.permission not in permissions:
        return f"the caller lacks the permission {tool.permission!r}"
    return None


def visible(
    caller: Caller,
    tools: Iterable[Tool],
    *,
    permissions: frozenset[str],
    settings: Settings,
    enabled: Callable[[str | None], bool],
    allow: Allow = "all",
) -> list[Tool]:
    """The ``tools`` that ``caller`` may see now, in their order: those ``hidden_reason`` finds
    no reason to hide (the same rules, written as one pass without building reasons; a test
    holds the two to each other).

    Each module's ``enabled()`` is asked once per call, not once per tool.
    """
    shown = list(tools)
    flags = {module: enabled(module) for module in {tool.module for tool in shown}}
    kind = caller.kind
    if kind == "public":
        return [t for t in shown if flags[t.module] and t.audience == "public"]
    switch = settings.api_session_write_modules
    scopes = caller.scopes
    every = allow == "all"
    return [
        t
        for t in shown
        if flags[t.module]
        and not (kind == "session" and t.is_write and not t.is_system and t.module not in switch)
        and (
            t.audience == "public"
            or (
                (
                    kind != "key"
                    or ((t.scope is None or t.scope in scopes) and (every or t.name in allow))
                )
                and (t.permission is None or t.permission in permissions)
            )
        )
    ]
