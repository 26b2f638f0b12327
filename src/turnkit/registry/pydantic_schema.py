"""Turn a pydantic model class into a schema of turnkit's subset.

Pydantic writes nested models as ``$ref`` into ``$defs`` and optional fields as
``anyOf: [<schema>, {"type": "null"}]``; the subset has neither. This module inlines the references
and folds the nullable ``anyOf`` into ``type: [<type>, "null"]``. Whatever cannot be expressed
(recursive models, real unions, ``dict[str, X]``) is left as pydantic wrote it, so that
``check_schema`` names the exact place and keyword.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel

__all__ = ["is_model_class", "schema_from_model"]

JSON = dict[str, Any]


def is_model_class(value: object) -> bool:
    """True for a pydantic model class (not an instance)."""
    return isinstance(value, type) and issubclass(value, BaseModel)


def schema_from_model(model: type[BaseModel]) -> JSON:
    """The JSON Schema of ``model``'s input, rewritten into the subset where possible.

    Examples:
        >>> from pydantic import BaseModel
        >>> class Price(BaseModel):
        ...     sku: str
        ...     price: float | None = None
        >>> schema_from_model(Price)["properties"]["price"]["type"]
        ['number', 'null']
    """
    raw = model.model_json_schema(mode="validation")
    defs = raw.pop("$defs", {})
    return _rewrite(raw, defs, frozenset())


def _rewrite(node: object, defs: JSON, seen: frozenset[str]) -> Any:
    if isinstance(node, list):
        return [_rewrite(item, defs, seen) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        name = ref.removeprefix("#/$defs/")
        if name in seen or name not in defs:
            return node  # recursive or dangling: check_schema will report the $ref
        target = _rewrite(copy.deepcopy(defs[name]), defs, seen | {name})
        extra = {k: _rewrite(v, defs, seen) for k, v in node.items() if k != "$ref"}
        return {**target, **extra}
    out = {key: _descend(key, value, defs, seen) for key, value in node.items()}
    nullable = _fold_nullable(out.get("anyOf"))
    if nullable is not None:
        del out["anyOf"]
        out = {**nullable, **out}
    return out


def _descend(key: str, value: object, defs: JSON, seen: frozenset[str]) -> Any:
    if key == "properties" and isinstance(value, dict):
        return {name: _rewrite(sub, defs, seen) for name, sub in value.items()}
    if key in ("default", "examples", "const", "enum"):
        return value  # data, not schema
    return _rewrite(value, defs, seen)


def _fold_nullable(branches: object) -> JSON | None:
    """``[<schema with a single type>, {"type": "null"}]`` as one schema of a nullable type."""
    if not isinstance(branches, list) or len(branches) != 2 or {"type": "null"} not in branches:
        return None
    (other,) = [b for b in branches if b != {"type": "null"}] or [None]
    if not isinstance(other, dict) or not isinstance(other.get("type"), str):
        return None
    folded = dict(other)
    folded["type"] = [other["type"], "null"]
    if "enum" in folded and None not in folded["enum"]:
        folded["enum"] = [*folded["enum"], None]
    if "const" in folded:
        folded["enum"] = [folded.pop("const"), None]
    return folded
