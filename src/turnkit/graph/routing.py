"""Where the turn goes after each node (docs/architecture.md §6).

``call_model`` -> ``validate_args`` when the model called tools (valid or not), else the end.
``validate_args`` -> ``execute`` when some calls are valid, else back to the model with the errors.
``fit_results`` -> ``await_confirmation`` when this round held a write, else the model.
``await_confirmation`` -> itself while a call of this round has no decision, else the model.
"""

from __future__ import annotations

from typing import Literal

from langchain_core.messages import AIMessage

from turnkit.graph.views import Calls, Held, Messages
from turnkit.turn.messages import last_ai

__all__ = ["after_confirmation", "after_model", "after_results", "after_validation"]


def after_model(state: Messages) -> Literal["validate_args", "__end__"]:
    """To ``validate_args`` when the model called tools (valid or not), else the end."""
    ai = last_ai(state["messages"])
    if ai is not None and (ai.tool_calls or ai.invalid_tool_calls):
        return "validate_args"
    return "__end__"


def after_validation(state: Calls) -> Literal["execute", "call_model"]:
    """To ``execute`` when some calls are valid, else back to the model with the errors."""
    return "execute" if state.get("calls") else "call_model"


def after_results(state: Held) -> Literal["await_confirmation", "call_model"]:
    """To ``await_confirmation`` when this round held a write, else back to the model."""
    return "await_confirmation" if _held_this_round(state) else "call_model"


def after_confirmation(state: Held) -> Literal["await_confirmation", "call_model"]:
    """Ask again while a call of this round has no decision, else back to the model."""
    return "await_confirmation" if _held_this_round(state) else "call_model"


def _held_this_round(state: Held) -> bool:
    """True when a held call's tool message follows the latest AI message that made calls.

    Compared by message, not by tool call id: some servers use the same call ids every round.
    """
    held = state.get("held") or []
    if not held:
        return False
    held_messages = {call["message_id"] for call in held}
    for message in reversed(state["messages"]):
        if message.id in held_messages:
            return True
        if isinstance(message, AIMessage) and message.tool_calls:
            return False
    return False
