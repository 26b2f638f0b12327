"""``list_tools``: at the start of a turn, list the tools the caller may use now.

Also reconciles writes held in earlier turns (a new user message was sent instead of a resume): a
confirmation decided since — from the CLI, another process — gets its held tool message replaced by
the outcome, and so does one that expired meanwhile (``confirmation_expired``, once); one still
pending stays held and is listed again in the next interrupt. And repairs
a history that a stopped turn left invalid: tool calls without answers get one (``repaired``).
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from turnkit.graph.state import HeldCall, TurnState
from turnkit.nodes.bound import Bound
from turnkit.nodes.messages import answered, repaired, settled, tool_message
from turnkit.nodes.tools import for_model
from turnkit.registry.ledger import Confirmation
from turnkit.registry.settings import Settings
from turnkit.registry.tool import Tool

__all__ = ["alist_tools", "list_tools"]


def list_tools(state: TurnState, runtime: Runtime[Any], *, bound: Bound) -> dict[str, Any]:
    """Sync node: the caller's tools now, and the held calls decided since."""
    caller, allow = bound.caller(runtime)
    executor = bound.executor
    visibility, turn = bound.both_settings(executor.ledger.settings())  # one read for both
    tools = executor.visible_for(caller, allow, settings=visibility)
    held = state.get("held") or []
    found = [executor.confirmation(h["confirmation_id"]) for h in held]
    return _update(tools, held, found, turn, state.get("messages") or [])


async def alist_tools(state: TurnState, runtime: Runtime[Any], *, bound: Bound) -> dict[str, Any]:
    """Async node: as ``list_tools``, without blocking the event loop."""
    caller, allow = bound.caller(runtime)
    executor = bound.executor
    visibility, turn = bound.both_settings(await executor.ledger.asettings())
    tools = await executor.avisible_for(caller, allow, settings=visibility)
    held = state.get("held") or []
    found = [await executor.aconfirmation(h["confirmation_id"]) for h in held]
    return _update(tools, held, found, turn, state.get("messages") or [])


def _update(
    tools: list[Tool],
    held: list[HeldCall],
    found: list[Confirmation | None],
    settings: Settings,
    messages: list[Any],
) -> dict[str, Any]:
    limit = settings.agent_tool_result_chars
    definitions, by_name = for_model(tools)
    update: dict[str, Any] = {
        "tools": definitions,
        "tool_names": {name: tool.name for name, tool in by_name.items()},
        "round": 0,
        "calls": [],
        "answers": {},
        "limits": {"max_rounds": settings.max_rounds, "result_chars": limit},
    }
    replaced: list[Any] = []
    if held:
        still = []
        for call, confirmation in zip(held, found, strict=True):
            if confirmation is None or confirmation.outcome is not None:
                outcome = settled(call["confirmation_id"], confirmation)
                replaced.append(
                    tool_message(
                        call["tool_call_id"],
                        answered(outcome, limit),
                        message_id=call["message_id"],
                    )
                )
            else:
                still.append(call)
        update["held"] = still
    changes = replaced + repaired(messages)
    if changes:
        update["messages"] = changes
    return update
