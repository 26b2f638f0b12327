"""``fit_results``: the round's answers as tool messages; held writes noted for the interrupt.

A held write's message is ``held_result(id)`` — never a token, a preview or its arguments. Every
other answer is the executor's answer fitted to ``agent_tool_result_chars``: what the model
receives is exactly what the checkpoint keeps.
"""

from __future__ import annotations

import uuid
from typing import Any

from turnkit.graph.state import HeldCall, TurnState
from turnkit.nodes.messages import tool_message
from turnkit.nodes.tools import held, held_result

__all__ = ["fit_results"]


def fit_results(state: TurnState) -> dict[str, Any]:
    """Pure node: tool messages for the answers of ``execute``."""
    answers = state.get("answers") or {}
    holding = list(state.get("held") or [])
    messages = []
    for tool_call_id, answer in answers.items():
        confirmation_id = held(answer)
        if confirmation_id is None:
            messages.append(tool_message(tool_call_id, answer))
            continue
        message_id = str(uuid.uuid4())
        messages.append(
            tool_message(tool_call_id, held_result(confirmation_id), message_id=message_id)
        )
        holding.append(
            HeldCall(
                confirmation_id=confirmation_id,
                tool_call_id=tool_call_id,
                message_id=message_id,
                tool=_tool_of(state, tool_call_id),
            )
        )
    return {"messages": messages, "answers": {}, "held": holding}


def _tool_of(state: TurnState, tool_call_id: str) -> str:
    for message in reversed(state["messages"]):
        for call in getattr(message, "tool_calls", None) or []:
            if call.get("id") == tool_call_id:
                return (state.get("tool_names") or {}).get(call["name"], call["name"])
    return ""
