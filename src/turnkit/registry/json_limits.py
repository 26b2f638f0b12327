"""The limits of the JSON data a tool call carries: nesting depth and 64-bit integers.

Python reads any JSON, but not everything Python reads can be kept: LangGraph's checkpointers
(msgpack) refuse integers outside 64 bits and nesting a few hundred levels deep, and a turn whose
model message cannot be checkpointed stops at ``call_model`` for good. So a tool's input, from a
model or any other caller, must be plain JSON data within these limits; the executor answers
anything else ``invalid_input`` with the reason, and the turn graph refuses such a model call before
it is stored (``turnkit.turn.model_reply``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Final

from turnkit.registry.pointers import pointer

__all__ = ["INT_MAX", "INT_MIN", "MAX_DEPTH", "json_problem"]

MAX_DEPTH: Final = 64
"""The deepest nesting of objects and arrays in a tool's input (the input object is level 1)."""
INT_MIN: Final = -(2**63)
"""The smallest integer accepted: a signed 64-bit integer."""
INT_MAX: Final = 2**63 - 1
"""The largest integer accepted: a signed 64-bit integer."""

_SHOWN = 120

_Where = tuple["_Where", str | int] | None
"""Where an item sits: its container's ``_Where`` and its key or index (None: the root). Kept
as a chain, and written as a path only for the item a problem is reported at: building each
item's path string as the walk went cost more than the check itself."""


def json_problem(
    value: object,
    *,
    max_depth: int = MAX_DEPTH,
    other: Callable[[object], str | None] | None = None,
) -> str | None:
    """None when ``value`` is plain JSON data within the limits, else what is wrong, with where.

    Plain JSON data is ``dict`` (string keys), ``list`` (or ``tuple``), ``str``, ``bool``,
    ``None``, an ``int`` within ``INT_MIN``..``INT_MAX`` and a finite ``float``, nested at most
    ``max_depth`` levels. ``other`` judges any other object (None: it is not JSON data).

    Examples:
        >>> json_problem({"limit": 10**30})[:33]
        'at /limit: the integer 1000000000'
        >>> json_problem({"a": [1, 2.5, None, "x"]}) is None
        True
    """
    stack: list[tuple[object, int, _Where]] = [(value, 1, None)]
    while stack:
        item, depth, where = stack.pop()
        if item is None or isinstance(item, str | bool):
            continue
        if isinstance(item, int):
            if not INT_MIN <= item <= INT_MAX:
                return f"{_at(where)}the integer {_digits(item)} is outside the 64-bit range" + (
                    f" ({INT_MIN} to {INT_MAX})"
                )
        elif isinstance(item, float):
            if not math.isfinite(item):
                return f"{_at(where)}{item!r} is not a finite number"
        elif isinstance(item, dict | list | tuple):
            if depth > max_depth:
                if _circular(value):
                    return "the data refers to itself (a circular reference)"
                return f"{_at(where)}the data nests deeper than {max_depth} levels"
            if isinstance(item, dict):
                for key, inner in item.items():
                    if not isinstance(key, str):
                        return f"{_at(where)}the object key {key!r:.40} is not a string"
                    stack.append((inner, depth + 1, (where, key)))
            else:
                stack.extend((inner, depth + 1, (where, i)) for i, inner in enumerate(item))
        else:
            problem = f"{type(item).__name__} is not JSON data" if other is None else other(item)
            if problem is not None:
                return f"{_at(where)}{problem}"
    return None


def _circular(value: object) -> bool:
    """True when ``value`` contains itself (checked only once it nests too deeply)."""
    try:
        json.dumps(value, default=repr)
    except ValueError as exc:
        return "Circular" in str(exc)
    except RecursionError:
        return False
    return False


def _digits(number: int) -> str:
    text = str(number)
    return text if len(text) <= 40 else f"{text[:20]}… ({len(text)} digits)"


def _at(where: _Where) -> str:
    """``at <JSON pointer>: `` of the item ``where`` leads to, cut at ``_SHOWN`` characters."""
    steps: list[str | int] = []
    while where is not None:
        where, step = where
        steps.append(step)
    path = pointer(reversed(steps))
    shown = path if len(path) <= _SHOWN else path[:_SHOWN] + "…"
    return f"at {shown or '(root)'}: "
