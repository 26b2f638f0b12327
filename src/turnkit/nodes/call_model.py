"""``call_model``: one model call with this turn's tools, within the round budget.

When ``max_rounds`` model calls have been made in this turn, the node answers with a clear final
message instead of calling the model again (LangGraph's own recursion limit is far away). The
model's message is checked before it is stored (``model_reply.checked_reply``): nothing a model
sends may crash a turn or run when it should not.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk, message_chunk_to_message
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from turnkit._compat import StreamingHandler, checkpoint_problem
from turnkit.nodes.state import TurnState
from turnkit.turn.bound import Bound
from turnkit.turn.messages import ROUND_LIMIT
from turnkit.turn.model_reply import StreamedArguments, checked_reply

__all__ = ["acall_model", "call_model"]


def call_model(
    state: TurnState, runtime: Runtime[Any], config: RunnableConfig, *, bound: Bound
) -> dict[str, Any]:
    """Sync node: the model's next message, checked before it is stored."""
    rounds = state.get("round", 0)
    limit = bound.turn_settings(state)[1].max_rounds
    if rounds >= limit:
        return _stop(limit)
    streamed = StreamedArguments()
    model, streams = bound.model_for(state.get("tools") or [])
    message = model.invoke(state["messages"], _recording(streams, config, streamed))
    return _reply(state, message, streamed, rounds)


async def acall_model(
    state: TurnState, runtime: Runtime[Any], config: RunnableConfig, *, bound: Bound
) -> dict[str, Any]:
    """Async node: as ``call_model``."""
    rounds = state.get("round", 0)
    limit = (await bound.aturn_settings(state))[1].max_rounds
    if rounds >= limit:
        return _stop(limit)
    streamed = StreamedArguments()
    model, streams = bound.model_for(state.get("tools") or [])
    message = await model.ainvoke(state["messages"], _recording(streams, config, streamed))
    return _reply(state, message, streamed, rounds)


def _recording(
    streams: bool, config: RunnableConfig, streamed: StreamedArguments
) -> RunnableConfig | None:
    """The node's config with ``streamed`` added to its callbacks when the call may stream, else
    None: the model then takes the node's config from the run's context, as any runnable called
    inside a node does, without merging it again (~30 µs a model call).

    A handler costs every model call ~100 µs of callback events, so it is added only when
    LangChain may build the reply from chunks: a streaming handler in the callbacks (LangGraph's
    ``messages`` mode), or a model set to stream. The manager is copied and extended (~2 µs), not
    merged with ``merge_configs`` (~16 µs, merging metadata that does not change).
    """
    callbacks = config.get("callbacks")
    if not (streams or _streaming(callbacks)):
        return None
    if callbacks is None:
        return {**config, "callbacks": [streamed]}
    if isinstance(callbacks, list):
        return {**config, "callbacks": [*callbacks, streamed]}
    manager = callbacks.copy()
    manager.add_handler(streamed, inherit=True)
    return {**config, "callbacks": manager}


def _streaming(callbacks: Any) -> bool:
    handlers = callbacks if isinstance(callbacks, list) else getattr(callbacks, "handlers", None)
    return any(isinstance(handler, StreamingHandler) for handler in handlers or ())


def _reply(
    state: TurnState, message: Any, streamed: StreamedArguments, rounds: int
) -> dict[str, Any]:
    if not isinstance(message, AIMessage):
        raise TypeError(
            f"the model returned {type(message).__name__}, not an AIMessage: pass a LangChain chat"
            " model (one with bind_tools)"
        )
    chunks = streamed.tool_call_chunks()
    if isinstance(message, AIMessageChunk):  # a model that answers with a chunk: its calls were
        chunks = chunks or list(message.tool_call_chunks)  # merged leniently, like a stream's
        message = message_chunk_to_message(message)
    checked = checked_reply(
        message, state["messages"], chunks, checkpoint_problem=checkpoint_problem
    )
    return {"messages": [checked], "round": rounds + 1}


def _stop(limit: int) -> dict[str, Any]:
    return {"messages": [AIMessage(content=ROUND_LIMIT.format(rounds=limit))]}
