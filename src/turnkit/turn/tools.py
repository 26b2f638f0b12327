"""One round of tools for the model: definitions, arguments, fitting, held answers (§5 of
docs/architecture.md).

Pure functions, no LangGraph: the graph nodes call them.

- ``for_model(tools)``: OpenAI function tools and the map from model name back to the tool.
- ``arguments(args)``: the JSON object the model sent, without control fields, or None.
- ``fit(result, limit)``: the result itself, or a truncated form whose own JSON fits ``limit``.
- ``held_result(id)``: what the model sees of a held write (a typed ``Held`` answer says the rest).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from turnkit.registry.control import CONTROL_FIELDS
from turnkit.registry.json_text import COMPACT, compact
from turnkit.registry.names import model_name, model_names
from turnkit.registry.tool import Tool

__all__ = ["FIT_MINIMUM", "arguments", "fit", "fit_text", "for_model", "held_result"]

FIT_MINIMUM = 100
"""The smallest limit ``fit`` accepts: below it not even the truncation notice fits."""

_HINTS = (
    "the result was {size} characters of JSON, over the {limit} you can receive: call the tool"
    " again with narrower arguments (filters, a smaller page or limit) to get the rest",
    "result truncated: narrow the call",
    "",
)


def for_model(tools: Iterable[Tool]) -> tuple[list[dict[str, Any]], dict[str, Tool]]:
    """The OpenAI function definitions of ``tools`` and the map from model name to tool.

    A tool whose model name is not 1-64 characters of ``[a-zA-Z0-9_-]`` is left out; of two tools
    with one model name the first wins. Only a name in the map is ever executed.
    """
    definitions, chosen = _for_model(tuple(tools))
    return list(definitions), dict(chosen)


@lru_cache(maxsize=256)
def _for_model(tools: tuple[Tool, ...]) -> tuple[list[dict[str, Any]], dict[str, Tool]]:
    """Tools are immutable: the definitions of one list of tool objects are built once."""
    chosen = model_names(tools, name_of=_name)
    return [_definition(tool) for tool in chosen.values()], chosen


def _name(tool: Tool) -> str:
    return tool.name


@lru_cache(maxsize=65536)
def _definition(tool: Tool) -> dict[str, Any]:
    """A tool's definition; tools are immutable, so it is built once per tool object."""
    return {
        "type": "function",
        "function": {
            "name": model_name(tool.name),
            "description": tool.description or tool.title,
            "parameters": tool.input_schema,
        },
    }


def arguments(args: object) -> dict[str, Any] | None:
    """The arguments of a tool call as executor input: a JSON object minus control fields.

    Accepts the parsed object or its JSON text; anything that is not a JSON object is None.
    """
    if isinstance(args, str | bytes):
        try:
            args = json.loads(args)
        except (ValueError, RecursionError):
            return None
    if not isinstance(args, dict):
        return None
    return {key: value for key, value in args.items() if key not in CONTROL_FIELDS}


def fit(result: Any, limit: int) -> Any:
    """``result`` when its compact JSON (non-ASCII kept) is at most ``limit`` characters, else
    ``{"truncated": true, "partial": <a prefix of that JSON>, "hint": ...}`` whose JSON fits too.

    Raises:
        ValueError: ``limit`` is below ``FIT_MINIMUM``.
    """
    _, truncated = _fit(result, limit)
    return result if truncated is None else truncated


def fit_text(result: Any, limit: int) -> str:
    """The compact JSON of ``fit(result, limit)``, encoded once: what a tool message carries.

    Raises:
        ValueError: ``limit`` is below ``FIT_MINIMUM``.
    """
    text, truncated = _fit(result, limit)
    return text if truncated is None else compact(truncated)


def _fit(result: Any, limit: int) -> tuple[str, dict[str, Any] | None]:
    """``(compact JSON, None)`` when ``result`` fits, else ``("", its truncated form)``."""
    if limit < FIT_MINIMUM:
        raise ValueError(f"fit limit must be at least {FIT_MINIMUM} characters, got {limit}")
    if _surely_longer(result, limit):  # encode only the beginning: 10 MB costs ~1 ms, not ~100
        text, size = _beginning(result, limit), f"more than {limit}"
    else:
        text = compact(result)
        if len(text) <= limit:
            return text, None
        size = str(len(text))
    for hint in _HINTS:
        hint = hint.format(size=size, limit=limit)
        overhead = len(compact({"truncated": True, "partial": "", "hint": hint}))
        if overhead <= limit:
            break
    return "", {"truncated": True, "partial": _longest_prefix(text, limit - overhead), "hint": hint}


_PEEK = 256


def _surely_longer(value: Any, limit: int) -> bool:
    """True when a glance (a bounded walk) finds a list, object or string that alone is longer
    than ``limit`` in JSON: a string of over ``limit`` characters, a container of over
    ``limit // 2`` items (each takes at least two characters with its separator)."""
    stack, seen = [value], 0
    while stack and seen < _PEEK:
        item = stack.pop()
        seen += 1
        if isinstance(item, str):
            if len(item) > limit:
                return True
        elif isinstance(item, dict | list):
            if len(item) > limit // 2:
                return True
            stack.extend(item.values() if isinstance(item, dict) else item)
    return False


def _beginning(value: Any, limit: int) -> str:
    """The first ``limit + 1`` characters (or more) of ``value``'s compact JSON."""
    parts, size = [], 0
    for chunk in COMPACT.iterencode(value):
        parts.append(chunk)
        size += len(chunk)
        if size > limit:
            break
    return "".join(parts)


def _longest_prefix(text: str, budget: int) -> str:
    """The longest prefix of ``text`` whose JSON string escaping is at most ``budget`` chars."""
    low, high = 0, min(len(text), budget)  # escaping never shrinks a character
    while low < high:
        mid = (low + high + 1) // 2
        if len(compact(text[:mid])) - 2 <= budget:
            low = mid
        else:
            high = mid - 1
    return text[:low]


def held_result(confirmation_id: str) -> dict[str, str]:
    """What the model sees (and the checkpoint keeps) of a held write: status and id, no more."""
    return {"status": "confirmation_required", "confirmation_id": confirmation_id}
