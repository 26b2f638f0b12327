"""``call_model``: one model call with this turn's tools, within the round budget.

When ``max_rounds`` model calls have been made in this turn, the node answers with a clear final
message instead of calling the model again (LangGraph's own recursion limit is far away). The
model's message is checked before it is stored (``model_reply.checked_reply``): nothing a model
sends may crash a turn or run when it should not.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import merge_configs
from langgraph.runtime import Runtime

from turnkit.graph.state import TurnState
from turnkit.nodes.bound import Bound
from turnkit.nodes.messages import ROUND_LIMIT
from turnkit.nodes.model_reply import StreamedArguments, checked_reply

__all__ = ["acall_model", "call_model"]


def call_model(
    state: TurnState, runtime: Runtime[Any], config: RunnableConfig, *, bound: Bound
) -> dict[str, Any]:
    """Sync node: the model's next message, checked before it is stored."""
    rounds = state.get("round", 0)
    limit, _ = bound.limits(state)
    if rounds >= limit:
        return _stop(limit)
    streamed = StreamedArguments()
    message = _bound_model(bound, state).invoke(state["messages"], _recording(config, streamed))
    return _reply(state, message, streamed, rounds)


async def acall_model(
    state: TurnState, runtime: Runtime[Any], config: RunnableConfig, *, bound: Bound
) -> dict[str, Any]:
    """Async node: as ``call_model``."""
    rounds = state.get("round", 0)
    limit, _ = await bound.alimits(state)
    if rounds >= limit:
        return _stop(limit)
    streamed = StreamedArguments()
    model = _bound_model(bound, state)
    message = await model.ainvoke(state["messages"], _recording(config, streamed))
    return _reply(state, message, streamed, rounds)


def _bound_model(bound: Bound, state: TurnState) -> Any:
    tools = state.get("tools") or []
    return bound.model.bind_tools(tools) if tools else bound.model


def _recording(config: RunnableConfig, streamed: StreamedArguments) -> RunnableConfig:
    """The node's config with ``streamed`` added to its callbacks (the others kept)."""
    return merge_configs(config, {"callbacks": [streamed]})


def _reply(
    state: TurnState, message: Any, streamed: StreamedArguments, rounds: int
) -> dict[str, Any]:
    if not isinstance(message, AIMessage):
        raise TypeError(
            f"the model returned {type(message).__name__}, not an AIMessage: pass a LangChain chat"
            " model (one with bind_tools)"
        )
    checked = checked_reply(message, state["messages"], streamed.tool_call_chunks())
    return {"messages": [checked], "round": rounds + 1}


def _stop(limit: int) -> dict[str, Any]:
    return {"messages": [AIMessage(content=ROUND_LIMIT.format(rounds=limit))]}
