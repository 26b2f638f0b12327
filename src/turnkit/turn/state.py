"""``TurnState``: the checkpointed state of a turn, plain serializable data only.

Live objects (the executor, the model) are bound when the graph is built; the caller travels in
the runtime context. What is kept here is exactly what a resumed run needs.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired, TypedDict

from langchain_core.messages import AnyMessage

from turnkit.turn.history import messages_channel

__all__ = ["HeldCall", "PendingCall", "RoundAnswer", "TurnOutput", "TurnState"]


class PendingCall(TypedDict):
    """A valid tool call of this round, waiting for ``execute``."""

    id: str
    """The model's tool call id."""
    message_id: str
    """The id of the AI message that made the call (part of the idempotency key)."""
    tool: str
    """The registry name."""
    args: dict[str, Any]
    """The arguments, without control fields."""


class RoundAnswer(TypedDict):
    """A tool call's answer in this round, as the model will read it."""

    content: str
    """The tool message's content: the answer's compact JSON, fitted to the turn's limit.

    Kept as text, not data: a handler's result may hold what a checkpointer cannot store (an
    integer beyond 64 bits), and the text is exactly what the model receives."""
    status: Literal["success", "error"]
    """The tool message's status: ``error`` for an error answer."""
    held: NotRequired[str]
    """The confirmation id when the call is held for a person."""


class HeldCall(TypedDict):
    """A write of this or an earlier round that waits for a person's decision."""

    confirmation_id: str
    """The confirmation in the ledger."""
    tool_call_id: str
    """The tool call it answers."""
    message_id: str
    """The id of the tool message that says it is held (replaced by the outcome later)."""
    tool: str
    """The registry name."""
    problem: NotRequired[str]
    """Why the last decision was not applied (shown in the next interrupt)."""


class TurnState(TypedDict, total=False):
    """The state of a turn graph."""

    messages: Annotated[list[AnyMessage], messages_channel()]
    """The conversation; tool messages hold exactly what the model received.

    ``add_messages`` semantics, stored as deltas (``turnkit.turn.history``): a checkpoint keeps
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
