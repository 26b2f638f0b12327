"""What turnkit takes from LangGraph and LangChain beyond their plain public API, in one place:
their private parts, and the checkpoint serializer check the LangGraph-free ``turn/`` is handed.

Each is a deliberate choice (the reason is beside it), and ``tests/test_compat.py`` imports every
one of them, so an upgrade that moves or removes one fails there, loudly, by name.
"""

from __future__ import annotations

from langchain_core.tracers._streaming import _StreamingCallbackHandler as StreamingHandler
from langgraph._internal._constants import CONFIG_KEY_DURABILITY
from langgraph._internal._runnable import RunnableCallable
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

__all__ = ["CONFIG_KEY_DURABILITY", "RunnableCallable", "StreamingHandler", "checkpoint_problem"]

_SERDE = JsonPlusSerializer()


def checkpoint_problem(value: object) -> str | None:
    """Why LangGraph's checkpoint serializer cannot store ``value`` (an object that is not plain
    JSON data), or None when it can. ``turnkit.turn`` imports no LangGraph, so the node and the
    middleware hand this to ``model_reply.checked_reply``."""
    try:
        _SERDE.dumps_typed(value)
    except Exception as exc:  # any failure means a checkpointer would fail on it too
        return f"{type(value).__name__} cannot be stored ({str(exc)[:80]})"
    return None


# CONFIG_KEY_DURABILITY: the graph's default durability, set with ``with_config`` (a compiled
#   graph has no public setting for it; a run may still pass its own).
# RunnableCallable: a node with a sync and an async twin and ``trace=False`` (no callback run per
#   node: ~15 µs a step), as LangGraph builds its own nodes.
# StreamingHandler: the mark of a callback handler that makes LangChain stream a model call
#   (LangGraph's ``messages`` stream mode); such a call's tool-call text is merged leniently, so
#   ``call_model`` records it only then (``turnkit.turn.model_reply``).
