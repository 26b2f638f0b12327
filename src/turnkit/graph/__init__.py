"""The turn graph: state, runtime context, routing and ``build_turn_graph``."""

from turnkit.graph.build import build_turn_graph, builder
from turnkit.graph.context import TurnContext
from turnkit.graph.state import HeldCall, PendingCall, TurnOutput, TurnState

__all__ = [
    "HeldCall",
    "PendingCall",
    "TurnContext",
    "TurnOutput",
    "TurnState",
    "build_turn_graph",
    "builder",
]
