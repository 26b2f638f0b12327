"""The turn graph: state, runtime context, routing and ``build_turn_graph``.

``state``, ``history`` and ``context`` are plain modules the nodes import; the wiring
(``build``, ``routing``) imports the nodes. So this package gives ``build_turn_graph`` and
``builder`` on first use, and importing ``turnkit.turn.state`` (as every node does) never imports
the nodes back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from turnkit.turn.context import TurnContext
from turnkit.turn.state import HeldCall, PendingCall, TurnOutput, TurnState

if TYPE_CHECKING:
    from turnkit.graph.build import build_turn_graph, builder

__all__ = [
    "HeldCall",
    "PendingCall",
    "TurnContext",
    "TurnOutput",
    "TurnState",
    "build_turn_graph",
    "builder",
]


def __getattr__(name: str) -> Any:
    if name in ("build_turn_graph", "builder"):
        from turnkit.graph import build

        return getattr(build, name)
    raise AttributeError(f"module 'turnkit.graph' has no attribute {name!r}")
