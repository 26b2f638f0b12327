"""The turn graph: ``build_turn_graph`` and ``builder`` (``build``), ``with_thread_leases`` for a
graph built elsewhere, the routes (``routing``), and the state and context types they use
(``TurnState`` in ``turnkit.nodes.state``; ``TurnContext`` and the round's records in
``turnkit.turn``)."""

from __future__ import annotations

from turnkit.graph.build import build_turn_graph, builder, with_thread_leases
from turnkit.nodes.state import TurnOutput, TurnState
from turnkit.turn.context import TurnContext
from turnkit.turn.state import HeldCall, PendingCall

__all__ = [
    "HeldCall",
    "PendingCall",
    "TurnContext",
    "TurnOutput",
    "TurnState",
    "build_turn_graph",
    "builder",
    "with_thread_leases",
]
