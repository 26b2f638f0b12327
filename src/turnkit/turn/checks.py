"""Why a tool call of the model cannot run: an unknown name, arguments that are not a JSON
object, schema violations, or a refusal of ``model_reply`` — each as the error answer the model
reads to correct itself."""

from __future__ import annotations

import json
from typing import Any

from turnkit.registry.json_limits import MAX_DEPTH
from turnkit.registry.registry import Registry
from turnkit.registry.schema import VIOLATIONS_SHOWN
from turnkit.turn.messages import (
    INVALID_JSON,
    LIMITS,
    NO_TOOLS,
    NOT_AN_OBJECT,
    REFUSED,
    SCHEMA,
    UNKNOWN_TOOL,
    error_answer,
    kind_of,
)
from turnkit.turn.state import RoundAnswer
from turnkit.turn.tools import arguments

__all__ = ["call_problem", "unparsed"]


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
