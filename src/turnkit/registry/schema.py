"""The JSON Schema subset: ``check_schema`` refuses what is outside it, ``validate`` checks values.

Supported keywords (docs/architecture.md §2): ``type`` (a name or a list of names),
``properties``, ``required``,
``additionalProperties`` (boolean), ``items`` (one schema), ``minItems``, ``maxItems``,
``uniqueItems``, ``enum``, ``const``, ``minLength``, ``maxLength``, ``pattern``, ``format``
(``date``, ``date-time``, ``email``, ``uuid``, ``uri``; asserted), ``minimum``, ``maximum``,
``exclusiveMinimum``, ``exclusiveMaximum``, ``multipleOf``, and the annotations ``title``,
``description``, ``examples``, ``default``.

Validation runs on every tool call, so it is compiled once per distinct schema (``jsonschema_rs``,
about a microsecond for a typical input; see ``bench/validate.py``) and the results of both the
subset check and the compilation are kept in bounded caches.
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, NamedTuple

import jsonschema_rs

from turnkit.errors import SchemaError
from turnkit.registry.json_limits import json_problem
from turnkit.registry.pointers import pointer
from turnkit.registry.schema_rules import FORMATS, KEYWORDS, check_node
from turnkit.registry.schema_rules import MAX_DEPTH as MAX_SUBSCHEMA_DEPTH

__all__ = [
    "FORMATS",
    "KEYWORDS",
    "CompiledSchema",
    "Violation",
    "check_schema",
    "compile_schema",
    "ensure_schema",
    "validate",
]

Problem = tuple[str, str]
"""A subset problem: the JSON pointer of the offending place in the schema, and what to do."""

_CACHE_SIZE = 1024


class Violation(NamedTuple):
    """One way a value breaks its schema."""

    path: str
    """JSON pointer (RFC 6901) of the offending value in the input; ``""`` is the input itself."""
    message: str
    """What is wrong, worded so that a model can correct its call."""


def _canonical(schema: object) -> str | None:
    """A stable text key for a schema, or None when it is not plain JSON (then no caching)."""
    if not _string_keys(schema):
        return None  # json.dumps would turn 1 into "1" and hide the problem
    try:
        return json.dumps(schema, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return None


def _string_keys(value: object) -> bool:
    if isinstance(value, dict):
        return all(isinstance(k, str) and _string_keys(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_string_keys(item) for item in value)
    return True


@lru_cache(maxsize=_CACHE_SIZE)
def _check_canonical(text: str) -> tuple[Problem, ...]:
    return _check(json.loads(text))


def _check(schema: object) -> tuple[Problem, ...]:
    problems: list[Problem] = []
    check_node(schema, "", problems, 0)
    plain = json_problem(schema, max_depth=_PLAIN_DEPTH)  # e.g. a maximum of 10**30
    if plain is not None and not problems:
        problems.append(("", f"a schema is plain JSON data a checkpoint can store: {plain}"))
    return tuple(problems)


_PLAIN_DEPTH = 3 * MAX_SUBSCHEMA_DEPTH + 8
"""Containers a schema may nest (the subset's own depth rule is counted in sub-schemas)."""


def check_schema(schema: object) -> list[Problem]:
    """Every place where ``schema`` leaves the supported subset, as ``(path, message)`` pairs.

    An empty list means the schema is accepted. The answer is remembered per distinct schema in a
    bounded cache, so checking the same declaration again costs a dictionary lookup.

    Examples:
        >>> check_schema({"type": "object", "anyOf": []})  # doctest: +ELLIPSIS
        [('/anyOf', "keyword 'anyOf' is not supported; ...")]
    """
    key = _canonical(schema)
    if key is None:
        return list(_check(schema))
    return list(_check_canonical(key))


def ensure_schema(schema: object) -> None:
    """Raise ``SchemaError`` listing every problem when ``schema`` leaves the subset."""
    problems = check_schema(schema)
    if problems:
        raise SchemaError(problems)


VIOLATIONS_SHOWN = 20
"""The most schema violations one answer lists (to a model or a caller)."""
MESSAGE_LIMIT = 300
"""Violation messages quote the offending value; a huge value is cut to keep answers small."""


def _short(message: str) -> str:
    if len(message) <= MESSAGE_LIMIT:
        return message
    half = MESSAGE_LIMIT // 2
    return f"{message[:half]} … {message[-half:]}"


def _finite(value: object) -> bool:
    """False when a NaN or an infinity hides in ``value`` (jsonschema-rs reads them as null).

    An explicit stack and exact type checks: this runs on every valid input, so it must cost well
    under a microsecond for a typical one.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            stack.extend(item.values())  # type: ignore[attr-defined]  # type(item) is dict
        elif kind is list or kind is tuple:
            stack.extend(item)  # type: ignore[arg-type]  # a list or tuple
        elif isinstance(item, float) and not math.isfinite(item):
            return False
    return True


class CompiledSchema:
    """A schema checked against the subset and compiled for fast validation."""

    __slots__ = ("_validator", "schema")

    def __init__(self, schema: Mapping[str, Any]) -> None:
        ensure_schema(schema)
        self.schema = schema
        try:
            self._validator = jsonschema_rs.validator_for(dict(schema), validate_formats=True)
        except (ValueError, jsonschema_rs.ValidationError) as exc:  # e.g. a pattern Rust refuses
            raise SchemaError([("", f"schema does not compile: {exc}")]) from exc

    def is_valid(self, value: object) -> bool:
        """True when ``value`` satisfies the schema (the fast path: no messages are built)."""
        try:
            return self._validator.is_valid(value) and _finite(value)
        except (ValueError, TypeError, OverflowError, RecursionError):
            return False

    def errors(self, value: object, *, plain_json: bool = False) -> list[Violation]:
        """Every violation of the schema by ``value``; empty when it is valid.

        ``plain_json=True`` says the caller already knows ``value`` is plain JSON (no NaN or
        infinity), which saves a walk over it; the executor passes it after encoding the input.
        """
        try:
            if self._validator.is_valid(value):
                if plain_json or _finite(value):
                    return []
                return [Violation("", "contains NaN or infinity, which JSON cannot carry")]
            return [
                Violation(pointer(error.instance_path), _short(error.message))
                for error in self._validator.iter_errors(value)
            ]
        except (ValueError, TypeError, OverflowError, RecursionError) as exc:
            if isinstance(exc, RecursionError) or "Recursion limit" in str(exc):
                return [Violation("", "nests too deeply; send flatter data")]
            return [Violation("", f"is not a JSON value ({exc}); send only JSON data")]

    def __repr__(self) -> str:
        return f"CompiledSchema({self.schema!r})"


@lru_cache(maxsize=_CACHE_SIZE)
def _compile_canonical(text: str) -> CompiledSchema:
    return CompiledSchema(json.loads(text))


def compile_schema(schema: Mapping[str, Any] | CompiledSchema) -> CompiledSchema:
    """The compiled form of ``schema``, from a bounded cache keyed by the schema's content.

    Raises:
        SchemaError: when the schema leaves the subset (every problem is listed).
    """
    if isinstance(schema, CompiledSchema):
        return schema
    key = _canonical(schema)
    if key is None:
        return CompiledSchema(schema)
    return _compile_canonical(key)


_by_identity: OrderedDict[int, tuple[object, CompiledSchema]] = OrderedDict()


def validate(schema: Mapping[str, Any] | CompiledSchema, value: object) -> list[Violation]:
    """Every violation of ``schema`` by ``value`` as ``(JSON pointer, message)``; empty if valid.

    The compiled validator is found by the schema object's identity first (no re-serialisation on
    the hot path), then by its content. Treat a schema as frozen once it has been validated against.

    Examples:
        >>> validate({"type": "object", "required": ["sku"]}, {})
        [Violation(path='', message='"sku" is a required property')]
    """
    if isinstance(schema, CompiledSchema):
        return schema.errors(value)
    entry = _by_identity.get(id(schema))
    if entry is None or entry[0] is not schema:
        entry = (schema, compile_schema(schema))
        _by_identity[id(schema)] = entry
        if len(_by_identity) > _CACHE_SIZE:
            _by_identity.popitem(last=False)
    return entry[1].errors(value)


def cache_sizes() -> dict[str, int]:
    """How many entries each schema cache holds (for tests and diagnostics)."""
    return {
        "checked": _check_canonical.cache_info().currsize,
        "compiled": _compile_canonical.cache_info().currsize,
        "by_identity": len(_by_identity),
        "limit": _CACHE_SIZE,
    }
