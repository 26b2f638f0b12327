"""``validate_args``: answer every bad tool call so the model can correct itself.

An unknown name (with the list of available tools), arguments that are not JSON or not an object,
schema violations (every path), and the calls ``call_model`` refused (arguments beyond the limits,
a cut-off reply, a repeated id) each get an error answer. The valid calls go on to ``execute``.
Control fields the model smuggled into its arguments are dropped, never obeyed.

Answers are given in the order of the calls (``messages.call_ids``): when some calls are valid,
the errors wait in ``answers`` and ``fit_results`` gives them with the results; when none is,
they are given here and the turn goes back to the model.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage

from turnkit.nodes.state import TurnState
from turnkit.turn.bound import Bound
from turnkit.turn.checks import call_problem, unparsed
from turnkit.turn.messages import (
    call_ids,
    call_names,
    error_answer,
    last_ai,
    tool_message,
)
from turnkit.turn.model_reply import unique_call_ids
from turnkit.turn.state import PendingCall, RoundAnswer
from turnkit.turn.tools import arguments

__all__ = ["round_messages", "validate_args"]


def validate_args(state: TurnState, *, bound: Bound) -> dict[str, Any]:
    """Pure node: the round's valid calls, and an error answer for each bad one."""
    ai = last_ai(state["messages"])
    if ai is None:
        return {"calls": []}
    update: dict[str, Any] = {}
    checked = unique_call_ids(ai)  # a message that call_model did not check (update_state)
    if checked is not ai:
        ai, update["messages"] = checked, [checked]
    names = state.get("tool_names") or {}
    message_id = ai.id or ""
    calls: list[PendingCall] = []
    errors: dict[str, RoundAnswer] = {}
    for call in ai.tool_calls:
        call_id = call["id"] or ""
        problem = call_problem(str(call["name"]), call.get("args"), names, bound.executor.registry)
        if problem is not None:
            errors[call_id] = problem
        else:
            args = arguments(call.get("args"))
            calls.append(PendingCall(id=call_id, message_id=message_id, tool=names[call["name"]],
                                     args=args or {}))  # fmt: skip
    for bad in ai.invalid_tool_calls:
        errors[bad.get("id") or ""] = error_answer("invalid_input", unparsed(bad))
    if calls:
        return {**update, "calls": calls, "answers": errors}
    messages = [*update.get("messages", []), *round_messages(ai, errors)]
    return {"messages": messages, "calls": [], "answers": {}}


def round_messages(ai: AIMessage, answers: dict[str, RoundAnswer]) -> list[Any]:
    """Tool messages for ``answers``, in the order of ``ai``'s calls."""
    names = call_names(ai)
    ids = [cid for cid in call_ids(ai) if cid in answers]
    return [tool_message(cid, answers[cid], name=names.get(cid)) for cid in ids]
