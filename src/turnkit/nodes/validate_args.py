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

import json
from typing import Any

from langchain_core.messages import AIMessage

from turnkit.nodes.bound import Bound
from turnkit.nodes.messages import (
    INVALID_JSON,
    LIMITS,
    NO_TOOLS,
    NOT_AN_OBJECT,
    REFUSED,
    SCHEMA,
    UNKNOWN_TOOL,
    call_ids,
    call_names,
    error_answer,
    kind_of,
    last_ai,
    tool_message,
)
from turnkit.nodes.model_reply import unique_call_ids
from turnkit.nodes.tools import arguments
from turnkit.registry.json_limits import MAX_DEPTH
from turnkit.registry.registry import Registry
from turnkit.registry.schema import VIOLATIONS_SHOWN
from turnkit.turn.state import PendingCall, RoundAnswer, TurnState

__all__ = ["call_problem", "round_messages", "unparsed", "validate_args"]


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


def unparsed(bad: Any) -> str:
    """Why a call that cannot run is wrong: refused by ``call_model`` (the reason it gave), not
    JSON at all, or JSON but not an object."""
    error = bad.get("error")
    if isinstance(error, str) and error.startswith(REFUSED):
        return error.removeprefix(REFUSED)
    name = str(bad.get("name") or "")[:100]
    raw = bad.get("args")
    try:
        value = json.loads(raw, strict=False) if isinstance(raw, str) else raw
    except RecursionError:  # valid JSON or not, nested far beyond the limits
        problem = f"the data nests deeper than {MAX_DEPTH} levels"
        return LIMITS.format(name=name, problem=problem, depth=MAX_DEPTH)
    except ValueError as exc:
        return INVALID_JSON.format(name=name, error=str(exc)[:200])
    return NOT_AN_OBJECT.format(name=name, kind=kind_of(value))


def call_problem(
    name: str, raw: object, names: dict[str, str], registry: Registry
) -> RoundAnswer | None:
    """None for a valid call of ``name`` with the arguments ``raw``, else its error answer
    (``names``: the model names the caller may call now -> registry names)."""
    if name not in names:
        shown = name[:100]
        if not names:
            text = NO_TOOLS.format(name=shown)
        else:
            text = UNKNOWN_TOOL.format(name=shown, available=", ".join(sorted(names)))
        return error_answer("not_found", text)
    args = arguments(raw)
    if args is None:
        return error_answer("invalid_input", NOT_AN_OBJECT.format(name=name, kind=kind_of(raw)))
    tool = registry.get(names[name])
    violations = tool.input_validator.errors(args) if tool is not None else []
    if violations:
        first = violations[:VIOLATIONS_SHOWN]
        listed = "; ".join(f"at {v.path or '(root)'}: {v.message}" for v in first)
        details = [{"path": v.path[:300], "message": v.message} for v in first]
        text = SCHEMA.format(name=name, listed=listed)
        return error_answer("invalid_input", text, violations=details)
    return None
