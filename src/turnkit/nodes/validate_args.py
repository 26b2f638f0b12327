"""``validate_args``: answer every bad tool call so the model can correct itself.

An unknown name (with the list of available tools), arguments that are not JSON or not an object,
and schema violations (every path) each get an error tool message. The valid calls go on to
``execute``. Control fields the model smuggled into its arguments are dropped, never obeyed.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from langchain_core.messages import ToolMessage

from turnkit.graph.state import PendingCall, TurnState
from turnkit.nodes.bound import Bound
from turnkit.nodes.messages import (
    INVALID_JSON,
    NO_TOOLS,
    NOT_AN_OBJECT,
    SCHEMA,
    UNKNOWN_TOOL,
    error_message,
    kind_of,
    last_ai,
)
from turnkit.nodes.tools import arguments
from turnkit.registry.steps import VIOLATIONS_SHOWN

__all__ = ["validate_args"]


def validate_args(state: TurnState, *, bound: Bound) -> dict[str, Any]:
    """Pure node: the round's valid calls, and an error message for each bad one."""
    ai = last_ai(state["messages"])
    if ai is None:
        return {"calls": []}
    names = state.get("tool_names") or {}
    message_id = ai.id or ""
    calls: list[PendingCall] = []
    errors: list[ToolMessage] = []
    for call in ai.tool_calls:
        call_id = call.get("id") or f"call_{uuid.uuid4().hex[:12]}"
        problem = _problem(call["name"], call.get("args"), names, bound)
        if problem is not None:
            errors.append(problem(call_id))
        else:
            args = arguments(call.get("args"))
            calls.append(PendingCall(id=call_id, message_id=message_id, tool=names[call["name"]],
                                     args=args or {}))  # fmt: skip
    for bad in ai.invalid_tool_calls:
        call_id = bad.get("id") or f"call_{uuid.uuid4().hex[:12]}"
        errors.append(error_message(call_id, "invalid_input", _unparsed(bad)))
    update: dict[str, Any] = {"calls": calls}
    if errors:
        update["messages"] = errors
    return update


def _unparsed(bad: Any) -> str:
    """Why a call LangChain could not parse is wrong: not JSON at all, or JSON but no object."""
    name = str(bad.get("name") or "")[:100]
    raw = bad.get("args")
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except (ValueError, RecursionError) as exc:
        return INVALID_JSON.format(name=name, error=str(exc)[:200])
    return NOT_AN_OBJECT.format(name=name, kind=kind_of(value))


def _problem(name: str, raw: object, names: dict[str, str], bound: Bound) -> Any:
    """None for a valid call, else a function of the call id making its error message."""
    if name not in names:
        shown = name[:100]
        if not names:
            text = NO_TOOLS.format(name=shown)
        else:
            text = UNKNOWN_TOOL.format(name=shown, available=", ".join(sorted(names)))
        return lambda call_id: error_message(call_id, "not_found", text)
    args = arguments(raw)
    if args is None:
        text = NOT_AN_OBJECT.format(name=name, kind=kind_of(raw))
        return lambda call_id: error_message(call_id, "invalid_input", text)
    tool = bound.executor.registry.get(names[name])
    violations = tool.input_validator.errors(args) if tool is not None else []
    if violations:
        shown = violations[:VIOLATIONS_SHOWN]
        listed = "; ".join(f"at {v.path or '(root)'}: {v.message}" for v in shown)
        details = [{"path": v.path[:300], "message": v.message} for v in shown]
        text = SCHEMA.format(name=name, listed=listed)
        return lambda call_id: error_message(call_id, "invalid_input", text, violations=details)
    return None
