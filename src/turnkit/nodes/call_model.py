"""``call_model``: one model call with this turn's tools, within the round budget.

When ``max_rounds`` model calls have been made in this turn, the node answers with a clear final
message instead of calling the model again (LangGraph's own recursion limit is far away).
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage
from langgraph.runtime import Runtime

from turnkit.graph.state import TurnState
from turnkit.nodes.bound import Bound
from turnkit.nodes.messages import ROUND_LIMIT

__all__ = ["acall_model", "call_model"]


def call_model(state: TurnState, runtime: Runtime[Any], *, bound: Bound) -> dict[str, Any]:
    """Sync node: the model's next message."""
    rounds = state.get("round", 0)
    limit, _ = bound.limits(state)
    if rounds >= limit:
        return _stop(limit)
    message = _bound_model(bound, state).invoke(state["messages"])
    return {"messages": [message], "round": rounds + 1}


async def acall_model(state: TurnState, runtime: Runtime[Any], *, bound: Bound) -> dict[str, Any]:
    """Async node: as ``call_model``."""
    rounds = state.get("round", 0)
    limit, _ = await bound.alimits(state)
    if rounds >= limit:
        return _stop(limit)
    message = await _bound_model(bound, state).ainvoke(state["messages"])
    return {"messages": [message], "round": rounds + 1}


def _bound_model(bound: Bound, state: TurnState) -> Any:
    tools = state.get("tools") or []
    return bound.model.bind_tools(tools) if tools else bound.model


def _stop(limit: int) -> dict[str, Any]:
    return {"messages": [AIMessage(content=ROUND_LIMIT.format(rounds=limit))]}
