"""``fit_results``: the round's answers as tool messages, in the order of the calls.

The answers are the errors of ``validate_args`` and what ``execute`` ran or held, each already
fitted to ``agent_tool_result_chars`` as the JSON text the model reads: what the model receives is
exactly what the checkpoint keeps. A held write's message is ``held_result(id)`` — never a token, a
preview or its arguments — and the call is noted in ``held`` for ``await_confirmation``.
"""

from __future__ import annotations

from typing import Any

from turnkit.nodes.state import TurnState
from turnkit.registry import ids
from turnkit.turn.messages import call_ids, call_names, last_ai, tool_message
from turnkit.turn.state import HeldCall

__all__ = ["fit_results"]


def fit_results(state: TurnState) -> dict[str, Any]:
    """Pure node: one tool message per answered call of the round, in call order."""
    answers = state.get("answers") or {}
    ai = last_ai(state["messages"])
    order = call_ids(ai) if ai is not None else list(answers)
    names = call_names(ai) if ai is not None else {}
    tool_names = state.get("tool_names") or {}
    holding = list(state.get("held") or [])
    messages = []
    for tool_call_id in order:
        answer = answers.get(tool_call_id)
        if answer is None:
            continue
        confirmation_id = answer.get("held")
        if confirmation_id is None:
            messages.append(tool_message(tool_call_id, answer, name=names.get(tool_call_id)))
            continue
        message_id = ids.uuid4_text()
        name = names.get(tool_call_id, "")
        messages.append(tool_message(tool_call_id, answer, name=name, message_id=message_id))
        holding.append(
            HeldCall(
                confirmation_id=confirmation_id,
                tool_call_id=tool_call_id,
                message_id=message_id,
                tool=tool_names.get(name, name),
            )
        )
    return {"messages": messages, "answers": {}, "held": holding}
