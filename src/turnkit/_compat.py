"""The private parts of LangGraph and LangChain that turnkit uses, imported in one place.

Each is a deliberate choice (the reason is beside it), and ``tests/test_compat.py`` imports every
one of them, so an upgrade that moves or removes one fails there, loudly, by name.
"""

from __future__ import annotations

from langchain_core.tracers._streaming import _StreamingCallbackHandler as StreamingHandler
from langgraph._internal._constants import CONFIG_KEY_DURABILITY
from langgraph._internal._runnable import RunnableCallable

__all__ = ["CONFIG_KEY_DURABILITY", "RunnableCallable", "StreamingHandler"]

# CONFIG_KEY_DURABILITY: the graph's default durability, set with ``with_config`` (a compiled
#   graph has no public setting for it; a run may still pass its own).
# RunnableCallable: a node with a sync and an async twin and ``trace=False`` (no callback run per
#   node: ~15 µs a step), as LangGraph builds its own nodes.
# StreamingHandler: the mark of a callback handler that makes LangChain stream a model call
#   (LangGraph's ``messages`` stream mode); such a call's tool-call text is merged leniently, so
#   ``call_model`` records it only then (``turnkit.nodes.model_reply``).
