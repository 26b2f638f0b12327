"""The held arguments as a person reads and edits them, and the edit form read back.

``node`` turns an input into a tree the template renders: objects as labelled rows, a list of
objects as a table (a price list), other lists item by item, long lists folded with their count.
Every leaf carries its JSON pointer (``/prices/0/price``): the name of its field in the edit form
and the path of the schema's violations, so each violation is shown beside its field.
``rebuilt`` reads the form back into the input's own shape, each value in its old type when it
parses as one (else as the text typed, which the tool's schema then refuses beside the field).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from turnkit.registry.pointers import segment

__all__ = ["FOLD_OVER", "Node", "node", "rebuilt"]

FOLD_OVER = 10
"""Lists longer than this are folded, with their count."""


@dataclass(frozen=True, slots=True)
class Node:
    """One value of the input, ready for the template."""

    kind: str
    """``object``, ``table`` (a list of objects), ``list`` or ``scalar``."""
    pointer: str
    """The JSON pointer of the value in the input (``""`` for the whole input)."""
    value: Any = None
    """A scalar's value."""
    text: str = ""
    """A scalar as the form shows it (strings as typed, the rest as JSON)."""
    children: list[tuple[str, Node]] = field(default_factory=list)
    """An object's or a list's members: (label, node)."""
    columns: list[str] = field(default_factory=list)
    """A table's column names."""
    rows: list[list[Node | None]] = field(default_factory=list)
    """A table's cells (None where a row lacks the column)."""

    @property
    def folded(self) -> bool:
        """Whether the template folds the list (shows its count until opened)."""
        return len(self.rows or self.children) > FOLD_OVER

    @property
    def count(self) -> int:
        return len(self.rows or self.children)

    @property
    def slug(self) -> str:
        """An HTML id for the field of this value (unique per pointer, whatever its keys)."""
        plain = re.sub(r"[^A-Za-z0-9_-]", "_", self.pointer)
        return f"{plain}-{hashlib.sha256(self.pointer.encode()).hexdigest()[:8]}"


def node(value: Any, pointer: str = "") -> Node:
    """The tree of ``value`` at ``pointer``."""
    if isinstance(value, Mapping):
        children = [(str(k), node(v, f"{pointer}/{segment(k)}")) for k, v in value.items()]
        return Node("object", pointer, children=children)
    if isinstance(value, list):
        if value and all(isinstance(item, Mapping) for item in value):
            columns = list(dict.fromkeys(str(k) for item in value for k in item))
            rows = [
                [
                    node(item[c], f"{pointer}/{i}/{segment(c)}") if c in item else None
                    for c in columns
                ]
                for i, item in enumerate(value)
            ]
            return Node("table", pointer, columns=columns, rows=rows)
        children = [(str(i), node(item, f"{pointer}/{i}")) for i, item in enumerate(value)]
        return Node("list", pointer, children=children)
    text = value if isinstance(value, str) else json.dumps(value)
    return Node("scalar", pointer, value=value, text=text)


def rebuilt(original: Any, form: Mapping[str, str], pointer: str = "") -> Any:
    """``original`` with each leaf replaced by the form's field of its pointer, if sent."""
    if isinstance(original, Mapping):
        return {k: rebuilt(v, form, f"{pointer}/{segment(k)}") for k, v in original.items()}
    if isinstance(original, list):
        return [rebuilt(item, form, f"{pointer}/{i}") for i, item in enumerate(original)]
    if pointer not in form:
        return original
    return _typed(form[pointer], original)


def _typed(text: str, like: Any) -> Any:
    """``text`` read as a value of the type of ``like`` when it is one; else ``text`` itself."""
    if isinstance(like, str):
        return text
    try:
        parsed = json.loads(text)
    except ValueError:
        return text
    if isinstance(like, bool) or like is None:
        return parsed
    if isinstance(like, int | float) and isinstance(parsed, int | float):
        return parsed
    return text
