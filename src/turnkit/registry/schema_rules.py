"""One small rule per keyword of the schema subset; ``check_node`` walks a schema with them.

Each rule receives the keyword's value, the JSON pointer of the keyword, the problem list to append
to, and the nesting depth (for the rules that hold sub-schemas). Messages name the keyword and say
what to write instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jsonschema_rs

from turnkit.registry.pointers import segment

Problems = list[tuple[str, str]]
Rule = Callable[[object, str, Problems, int], None]

TYPES = frozenset({"object", "array", "string", "number", "integer", "boolean", "null"})
FORMATS = frozenset({"date", "date-time", "email", "uuid", "uri"})
MAX_DEPTH = 64

_HINTS = {
    "$ref": "inline the referenced schema",
    "$defs": "inline the definitions where they are used",
    "definitions": "inline the definitions where they are used",
    "anyOf": "for a nullable value write 'type': [<type>, 'null']; otherwise split the tool",
    "oneOf": "for a nullable value write 'type': [<type>, 'null']; otherwise split the tool",
    "allOf": "merge the schemas into one",
    "patternProperties": "list the properties, or take a list of {key, value} objects",
    "additionalItems": "use 'items' with one schema",
    "prefixItems": "use 'items' with one schema",
    "$schema": "remove it: the dialect is fixed",
}


def _is_number(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return not (isinstance(value, float) and not math.isfinite(value))


def _is_count(value: object) -> bool:
    """A whole number >= 0, as JSON Schema counts: ``2`` and ``2.0`` alike."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return value >= 0
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _type(value: object, path: str, problems: Problems, _depth: int) -> None:
    names = value if isinstance(value, list) else [value]
    if not names:
        problems.append((path, "'type' is an empty list; name at least one type"))
    for name in names:
        if not isinstance(name, str) or name not in TYPES:
            allowed = ", ".join(sorted(TYPES))
            problems.append((path, f"'type' {name!r} is not a JSON type; use one of: {allowed}"))
    if isinstance(value, list) and len(set(map(str, value))) != len(value):
        problems.append((path, "'type' lists a type twice; list each once"))


def _properties(value: object, path: str, problems: Problems, depth: int) -> None:
    if not isinstance(value, dict):
        problems.append((path, "'properties' must be an object mapping names to schemas"))
        return
    for name, sub in value.items():
        if not isinstance(name, str):
            problems.append((path, f"property name {name!r} is not a string"))
            continue
        check_node(sub, f"{path}/{segment(name)}", problems, depth + 1)


def _required(value: object, path: str, problems: Problems, _depth: int) -> None:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        problems.append((path, "'required' must be a list of property names (strings)"))
    elif len(set(value)) != len(value):
        problems.append((path, "'required' names a property twice; list each once"))


def _additional(value: object, path: str, problems: Problems, _depth: int) -> None:
    if not isinstance(value, bool):
        problems.append(
            (path, "'additionalProperties' must be true or false; a schema is not supported")
        )


def _items(value: object, path: str, problems: Problems, depth: int) -> None:
    if isinstance(value, list):
        problems.append((path, "'items' must be one schema; tuple validation is not supported"))
        return
    check_node(value, path, problems, depth + 1)


def _count(keyword: str) -> Rule:
    def rule(value: object, path: str, problems: Problems, _depth: int) -> None:
        if not _is_count(value):
            problems.append((path, f"{keyword!r} must be a whole number >= 0, got {value!r}"))

    return rule


def _number(keyword: str) -> Rule:
    def rule(value: object, path: str, problems: Problems, _depth: int) -> None:
        if not _is_number(value):
            problems.append((path, f"{keyword!r} must be a finite number, got {value!r}"))

    return rule


def _boolean(keyword: str) -> Rule:
    def rule(value: object, path: str, problems: Problems, _depth: int) -> None:
        if not isinstance(value, bool):
            problems.append((path, f"{keyword!r} must be true or false, got {value!r}"))

    return rule


def _string(keyword: str) -> Rule:
    def rule(value: object, path: str, problems: Problems, _depth: int) -> None:
        if not isinstance(value, str):
            problems.append((path, f"{keyword!r} must be a string, got {value!r}"))

    return rule


def _multiple_of(value: object, path: str, problems: Problems, _depth: int) -> None:
    if not _is_number(value) or value <= 0:  # type: ignore[operator]  # guarded by _is_number
        problems.append((path, f"'multipleOf' must be a number > 0, got {value!r}"))


def _enum(value: object, path: str, problems: Problems, _depth: int) -> None:
    if not isinstance(value, list) or not value:
        problems.append((path, "'enum' must be a non-empty list of allowed values"))


def _pattern(value: object, path: str, problems: Problems, _depth: int) -> None:
    if not isinstance(value, str):
        problems.append((path, f"'pattern' must be a regular expression string, got {value!r}"))
        return
    try:  # the dialect that validates (ECMA 262 via jsonschema-rs), not Python's re
        jsonschema_rs.validator_for({"type": "string", "pattern": value})
    except (ValueError, jsonschema_rs.ValidationError) as exc:
        reason = str(exc).splitlines()[0][:200]
        problems.append((path, f"'pattern' {value!r} is not a valid regular expression: {reason}"))


def _format(value: object, path: str, problems: Problems, _depth: int) -> None:
    if not isinstance(value, str) or value not in FORMATS:
        allowed = ", ".join(sorted(FORMATS))
        problems.append((path, f"'format' {value!r} is not supported; use one of: {allowed}"))


def _examples(value: object, path: str, problems: Problems, _depth: int) -> None:
    if not isinstance(value, list):
        problems.append((path, "'examples' must be a list of example values"))


def _anything(_value: object, _path: str, _problems: Problems, _depth: int) -> None:
    """``const`` and ``default`` take any JSON value."""


_RULES: dict[str, Rule] = {
    "type": _type,
    "properties": _properties,
    "required": _required,
    "additionalProperties": _additional,
    "items": _items,
    "minItems": _count("minItems"),
    "maxItems": _count("maxItems"),
    "uniqueItems": _boolean("uniqueItems"),
    "enum": _enum,
    "const": _anything,
    "minLength": _count("minLength"),
    "maxLength": _count("maxLength"),
    "pattern": _pattern,
    "format": _format,
    "minimum": _number("minimum"),
    "maximum": _number("maximum"),
    "exclusiveMinimum": _number("exclusiveMinimum"),
    "exclusiveMaximum": _number("exclusiveMaximum"),
    "multipleOf": _multiple_of,
    "title": _string("title"),
    "description": _string("description"),
    "examples": _examples,
    "default": _anything,
}

KEYWORDS = frozenset(_RULES)
"""Every keyword the subset accepts."""

_BOUNDS = (("minItems", "maxItems"), ("minLength", "maxLength"), ("minimum", "maximum"))
_STRICT_BOUNDS = (
    ("exclusiveMinimum", "exclusiveMaximum"),
    ("exclusiveMinimum", "maximum"),
    ("minimum", "exclusiveMaximum"),
)


def _check_bounds(node: dict[str, object], path: str, problems: Problems) -> None:
    for pairs, empty in (
        (_BOUNDS, lambda lo, hi: lo > hi),
        (_STRICT_BOUNDS, lambda lo, hi: lo >= hi),
    ):
        for low, high in pairs:
            lo, hi = node.get(low), node.get(high)
            if _is_number(lo) and _is_number(hi) and empty(lo, hi):
                problems.append((path, f"{low!r} {lo!r} and {high!r} {hi!r} leave nothing to fit"))


def check_node(node: object, path: str, problems: Problems, depth: int) -> None:
    """Append to ``problems`` each place where ``node`` (a schema at ``path``) leaves the subset."""
    if not isinstance(node, dict):
        got = type(node).__name__
        problems.append((path, f"a schema must be a JSON object, got {got}"))
        return
    if depth > MAX_DEPTH:
        problems.append((path, f"schema nests deeper than {MAX_DEPTH} levels; flatten it"))
        return
    for key, value in node.items():
        if not isinstance(key, str):
            problems.append((path, f"schema keyword {key!r} is not a string"))
            continue
        where = f"{path}/{segment(key)}"
        rule = _RULES.get(key)
        if rule is None:
            hint = _HINTS.get(key, "use only: " + ", ".join(sorted(KEYWORDS)))
            problems.append((where, f"keyword {key!r} is not supported; {hint}"))
            continue
        rule(value, where, problems, depth)
    _check_bounds(node, path, problems)
