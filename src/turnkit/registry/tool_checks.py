"""The rules of a tool declaration (docs/architecture.md §1), one function per field.

Each function takes the field's value (and what else it depends on) and returns the list of problems
it finds, each a sentence that starts with the field name and says what to write instead. ``Tool``
runs all of them and reports every problem at once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from turnkit.registry.control import CONTROL_FIELDS
from turnkit.registry.pydantic_schema import is_model_class, schema_from_model
from turnkit.registry.references import resolve
from turnkit.registry.schema import check_schema

NAME = re.compile(r"[a-z][a-z0-9]*(_[a-z0-9]+)*\.[a-z][a-z0-9]*(_[a-z0-9]+)+")
LOCAL_NAME = re.compile(r"local\.[a-z][a-z0-9_]*")
"""The developer's own tools (``turnkit.agent.local_tools``) keep their function names."""
SCOPE = re.compile(r"[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+:[a-z][a-z0-9_]*")
PERMISSION = re.compile(r"[a-z][a-z0-9_]*([.:][a-z0-9_]+)*")
NAME_LIMIT = 100
COST_LIMIT = 1000
ANNOTATION_KEYS = ("read_only", "destructive", "idempotent", "open_world")
DEFAULT_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {},
    "additionalProperties": False,
}


def name_problems(name: object) -> list[str]:
    """Problems of ``name``: a string, ``<namespace>.<verb>_<noun>``, at most 100 characters."""
    if not isinstance(name, str):
        return [f"name: must be a string like 'catalogue.list_products', got {name!r}"]
    problems = []
    if len(name) > NAME_LIMIT:
        problems.append(f"name: {name[:20]!r}... is {len(name)} characters; at most 100 allowed")
    if not NAME.fullmatch(name) and not LOCAL_NAME.fullmatch(name):
        problems.append(
            f"name: {name!r} must be '<namespace>.<verb>_<noun>' in lowercase letters, digits"
            " and underscores, e.g. 'catalogue.list_products'"
        )
    return problems


def rights_problems(name: object, audience: object, scope: object, permission: object) -> list[str]:
    """Problems of ``audience``, ``scope`` and ``permission`` together (docs/architecture.md §1)."""
    if audience not in ("admin", "public"):
        return [f"audience: {audience!r} is neither 'admin' (a key or session) nor 'public'"]
    if audience == "public":
        return [
            f"{field}: a public tool is called without a key, so {field} {value!r} could never be"
            f" met; remove it or make the tool audience='admin'"
            for field, value in (("scope", scope), ("permission", permission))
            if value is not None
        ]
    system = isinstance(name, str) and name.startswith("system.")
    problems = []
    if scope is None and not system:
        problems.append(
            "scope: an admin tool needs the scope a key must carry, e.g. 'catalogue.products:read'"
        )
    elif scope is not None and (not isinstance(scope, str) or not SCOPE.fullmatch(scope)):
        problems.append(
            f"scope: {scope!r} must be '<module>.<resource>:<action>' in lowercase,"
            " e.g. 'catalogue.products:write'"
        )
    if permission is None and not system:
        problems.append(
            "permission: an admin tool needs the role permission its caller must hold,"
            " e.g. 'catalogue.manage'"
        )
    elif permission is not None and (
        not isinstance(permission, str) or not PERMISSION.fullmatch(permission)
    ):
        problems.append(
            f"permission: {permission!r} must be a lowercase permission name such as"
            " 'shop.manage_catalog'"
        )
    return problems


def text_problems(field: str, value: object) -> list[str]:
    """A problem when a text field holds something other than a string or None."""
    if value is None or isinstance(value, str):
        return []
    return [f"{field}: must be a string, got {type(value).__name__}"]


def resolve_schema(field: str, value: object) -> tuple[dict[str, Any] | None, list[str]]:
    """The schema as a dict (a pydantic model class converted) and the problems of that schema."""
    if is_model_class(value):
        value = schema_from_model(value)  # type: ignore[arg-type]  # checked just above
    if not isinstance(value, Mapping):
        return None, [
            f"{field}: must be a JSON Schema object or a pydantic model class,"
            f" got {type(value).__name__}"
        ]
    schema = dict(value)
    return schema, [f"{field}: {path or '/'}: {message}" for path, message in check_schema(schema)]


def input_root_problems(schema: Mapping[str, Any]) -> list[str]:
    """Problems of an input schema's root: ``type: object`` and no control field as a property."""
    problems = []
    if schema.get("type") != "object":
        problems.append(
            f"input_schema: the root must be 'type': 'object' (tool input is a JSON object),"
            f" got {schema.get('type')!r}"
        )
    properties = schema.get("properties")
    declared = set(properties) if isinstance(properties, Mapping) else set()
    for field in sorted(declared & CONTROL_FIELDS):
        problems.append(
            f"input_schema: property {field!r} is a control field turnkit sets itself;"
            " rename the property"
        )
    return problems


def resolve_handler(handler: object) -> tuple[Callable[..., Any] | None, list[str]]:
    """The handler as a callable (a ``"package.module:function"`` string imported) and problems."""
    if isinstance(handler, str):
        try:
            handler = resolve(handler)
        except ValueError as exc:
            return None, [f"handler: {exc}"]
    if not callable(handler):
        return None, [
            f"handler: must be a callable (input, ctx) -> result or 'package.module:function',"
            f" got {type(handler).__name__}"
        ]
    return handler, []


def annotation_problems(value: object) -> list[str]:
    """Problems of ``annotations`` given as a mapping: unknown flags, non-boolean values."""
    if value is None or not isinstance(value, Mapping):
        return [] if value is None else ["annotations: must be Annotations(...) or a dict of flags"]
    problems = [
        f"annotations: unknown flag {key!r}; known flags: {', '.join(ANNOTATION_KEYS)}"
        for key in value
        if key not in ANNOTATION_KEYS
    ]
    problems += [
        f"annotations: {key!r} must be true or false, got {flag!r}"
        for key, flag in value.items()
        if key in ANNOTATION_KEYS and not isinstance(flag, bool)
    ]
    return problems


def danger_problems(danger: object) -> list[str]:
    """A problem unless ``danger`` is None, ``"always"`` or a check function."""
    if danger is None or danger == "always" or callable(danger):
        return []
    return [
        f"danger: {danger!r} is not None (never, but for large batches), 'always',"
        " or a check function (input, ctx) -> bool (or a Quorum)"
    ]


def approval_problems(approvals: object, separate_duties: object, preview: object) -> list[str]:
    """Problems of ``approvals`` (a whole number 1..10), ``separate_duties`` (a bool) and
    ``preview`` (None or a function ``(input, ctx) -> JSON``)."""
    problems = []
    if not _positive_int(approvals) or approvals > MAX_APPROVALS:  # type: ignore[operator]
        problems.append(
            f"approvals: the distinct people who must approve a held call, a whole number"
            f" from 1 to {MAX_APPROVALS}, got {approvals!r}"
        )
    if not isinstance(separate_duties, bool):
        problems.append(f"separate_duties: must be true or false, got {separate_duties!r}")
    if preview is not None and not callable(preview):
        problems.append(
            f"preview: {preview!r} is not a function (input, ctx) -> JSON saying what the"
            " write would change"
        )
    return problems


MAX_APPROVALS = 10
"""The most approvals a tool may require."""


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def max_items_problems(max_items: object) -> list[str]:
    """A problem unless ``max_items`` is None or a whole number >= 1."""
    if max_items is None or _positive_int(max_items):
        return []
    return [f"max_items: must be a whole number >= 1 or None, got {max_items!r}"]


def cost_problems(cost: object) -> list[str]:
    """A problem unless ``cost`` is None, a whole number 1..1000, or a function."""
    if cost is None or callable(cost):
        return []
    if _positive_int(cost) and cost <= COST_LIMIT:  # type: ignore[operator]  # an int here
        return []
    return [
        f"cost: {cost!r} must be None (the default rule), a whole number from 1 to 1000,"
        " or a function (input) -> int"
    ]
