"""The records of a round that the graph's nodes and the ``create_agent`` middleware both keep:
a call waiting to run, an answer as the model will read it, a write waiting for a person.
Plain serializable data (the graph's ``TurnState`` in ``turnkit.nodes.state`` holds them)."""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

__all__ = ["HeldCall", "PendingCall", "RoundAnswer"]


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
