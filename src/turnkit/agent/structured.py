"""Structured output: a schema the final answer must match, and its parsing.

``schema`` is a pydantic model class, a JSON Schema dict, or a shorthand — a dict from
field name to a JSON type name (``{"name": "string", "age": "integer"}``). The model is told the
schema in the system message; its final answer is parsed as JSON (a ```json fence is allowed) and
validated. ``parse`` returns the pydantic instance, or the dict for a JSON Schema, and raises
``StructuredOutputError`` saying exactly what was wrong.
"""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
from pydantic import BaseModel, ValidationError

from turnkit.errors import TurnkitError

__all__ = ["StructuredOutputError", "instruction", "json_schema", "parse"]

_TYPE_NAMES = {"string", "integer", "number", "boolean", "array", "object", "null"}
_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


class StructuredOutputError(TurnkitError, ValueError):
    """The model's final answer is not JSON matching the requested schema."""

    def __init__(self, message: str, content: str) -> None:
        super().__init__(message)
        self.content = content


def json_schema(schema: Any) -> dict[str, Any]:
    """The JSON Schema of ``schema`` (a pydantic model class, a JSON Schema, or the shorthand)."""
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema.model_json_schema()
    if not isinstance(schema, dict) or not schema:
        raise TypeError("schema must be a pydantic model class or a non-empty JSON Schema dict")
    if "type" not in schema and all(v in _TYPE_NAMES for v in schema.values()):
        return {
            "type": "object",
            "properties": {name: {"type": kind} for name, kind in schema.items()},
            "required": list(schema),
        }
    return schema


def instruction(schema: Any) -> str:
    """What the system message tells the model about its final answer."""
    text = json.dumps(json_schema(schema), separators=(",", ":"))
    return (
        "When you give your final answer, reply with only one JSON object (no prose around it)"
        f" that matches this JSON Schema: {text}"
    )


def parse(content: str, schema: Any) -> Any:
    """The final answer ``content`` validated against ``schema``.

    Raises:
        StructuredOutputError: the content is not JSON, or not of the schema (every problem listed).
    """
    fenced = _FENCE.match(content)
    text = fenced.group(1) if fenced else content.strip()
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise StructuredOutputError(
            f"the model's answer is not JSON ({exc}): {content[:200]!r}", content
        ) from None
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        try:
            return schema.model_validate(value)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or '(root)'}: {e['msg']}" for e in exc.errors()
            )
            raise StructuredOutputError(
                f"the model's answer does not match {schema.__name__}: {problems}", content
            ) from None
    validator = jsonschema.Draft202012Validator(json_schema(schema))
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    if errors:
        problems = "; ".join(
            f"{'/' + '/'.join(map(str, e.absolute_path)) if e.absolute_path else '(root)'}:"
            f" {e.message}"
            for e in errors
        )
        raise StructuredOutputError(
            f"the model's answer does not match the schema: {problems}", content
        )
    return value
