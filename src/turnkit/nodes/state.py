"""``TurnState``: the checkpointed state of a turn graph, plain serializable data only.

Live objects (the executor, the model) are bound when the graph is built; the caller travels in
the runtime context. What is kept here is exactly what a resumed run needs.
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

from langchain_core.messages import AnyMessage

from turnkit.nodes.history import messages_channel
from turnkit.turn.state import HeldCall, PendingCall, RoundAnswer

__all__ = ["TurnOutput", "TurnState"]


class TurnState(TypedDict, total=False):
    """The state of a turn graph."""

    messages: Annotated[list[AnyMessage], messages_channel()]
    """The conversation; tool messages hold exactly what the model received.

    ``add_messages`` semantics, stored as deltas (``turnkit.nodes.history``): a checkpoint keeps
    the round's new messages, not the whole conversation again.
    """
    tools: list[dict[str, Any]]
    """This turn's OpenAI tool definitions, listed for the caller at the turn's start."""
    tool_names: dict[str, str]
    """Model name -> registry name; only these names are ever executed."""
    round: int
    """Model calls made in this turn."""
    calls: list[PendingCall]
    """This round's valid calls, for ``execute``."""
    answers: dict[str, RoundAnswer]
    """Tool call id -> its answer this round: the errors of ``validate_args`` and what
    ``execute`` ran or held, for ``fit_results`` to give in the order of the calls."""
    held: list[HeldCall]
    """Writes waiting for a decision."""
    overrides: dict[str, Any]
    """The operator's settings (``ledger.settings()``), read once at the start of each run
    (``list_tools``; ``await_confirmation`` on a resume) and used by every node of the run."""


class TurnOutput(TypedDict):
    """What ``invoke`` returns (plus ``__interrupt__`` while writes are held): the conversation.

    The other keys of ``TurnState`` are the turn's plumbing; ``graph.get_state(config).values``
    still shows them. Leaving them out of the output spares LangGraph reading them after every
    step (~14 µs a step).
    """

    messages: list[AnyMessage]
