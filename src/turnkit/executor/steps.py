"""Pure pieces of the execute pipeline: control fields, input checks, list lengths, cost, holds.

Nothing here touches the ledger or runs a handler; ``pipeline.py`` strings these together.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

from turnkit.executor.answers import Refused
from turnkit.registry.caller import Caller
from turnkit.registry.context import CallContext
from turnkit.registry.control import CONTROL_FIELDS, CONTROL_TYPES
from turnkit.registry.json_limits import MAX_DEPTH, json_problem
from turnkit.registry.json_text import canonical
from turnkit.registry.schema import VIOLATIONS_SHOWN
from turnkit.registry.settings import Settings
from turnkit.registry.tool import Quorum, Tool

log = logging.getLogger("turnkit.executor")

KEY_LIMIT = 255
"""The longest idempotency key accepted."""


def control_error(control: object) -> Refused | None:
    """Step 2: an ``invalid_input`` answer when the control fields are malformed, else None."""
    if control is None:
        return None
    if not isinstance(control, Mapping):
        return Refused(
            "invalid_input", f"control must be an object of control fields, got {_kind(control)}"
        )
    problems = []
    for field, value in control.items():
        expected = CONTROL_TYPES.get(field) if isinstance(field, str) else None
        if expected is None:
            known = ", ".join(sorted(CONTROL_FIELDS))
            problems.append(f"{str(field)[:40]!r} is not a control field; known: {known}")
        elif type(value) is not expected:
            problems.append(f"{field!r} must be a {expected.__name__}, got {_kind(value)}")
        elif field == "idempotency_key" and not 0 < len(str(value)) <= KEY_LIMIT:
            problems.append(f"'idempotency_key' must be 1 to {KEY_LIMIT} characters")
        elif isinstance(value, str) and not plain_text(value):
            problems.append(f"{field!r} must be printable Unicode text (no NUL, no lone surrogate)")
    if problems:
        return Refused(
            "invalid_input",
            "invalid control fields: " + "; ".join(problems),
            {"problems": problems},
        )
    return None


def plain_text(value: str) -> bool:
    """True when ``value`` is valid Unicode without NUL: storable as text by every database."""
    if "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def input_error(tool: Tool, value: object, settings: Settings) -> tuple[Refused | None, str]:
    """Step 3: an ``invalid_input`` answer (or None) and the input's canonical JSON."""
    if not isinstance(value, dict):
        return Refused("invalid_input", f"the input must be a JSON object, got {_kind(value)}"), ""
    smuggled = sorted(CONTROL_FIELDS.intersection(value))
    if smuggled:  # no tool declares them (tool_checks): in the input they would reach a handler
        return Refused(
            "invalid_input",
            f"{', '.join(map(repr, smuggled))} in the input: control fields go beside the input"
            " (over REST: beside 'input' in the body; the Idempotency-Key header), never in it",
            {"control_fields": smuggled},
        ), ""
    problem = json_problem(value)
    if problem is not None:
        return Refused(
            "invalid_input",
            f"the input is not plain JSON data within turnkit's limits: {problem}",
            {"max_depth": MAX_DEPTH},
        ), ""
    text = canonical(value)
    if len(text) > settings.max_input_chars:
        return Refused(
            "invalid_input",
            f"the input is {len(text)} characters of JSON; at most {settings.max_input_chars}"
            " are accepted: send less data per call",
            {"limit": settings.max_input_chars},
        ), text
    violations = tool.input_validator.errors(value, plain_json=True)
    if violations:
        shown = violations[:VIOLATIONS_SHOWN]
        listed = "; ".join(f"at {v.path or '(root)'}: {v.message}" for v in shown)
        more = len(violations) - len(shown)
        return Refused(
            "invalid_input",
            f"the arguments do not match the input schema of {tool.name!r}; fix these and call"
            f" again: {listed}" + (f" (and {more} more)" if more else ""),
            {"violations": [{"path": v.path[:300], "message": v.message} for v in shown]},
        ), text
    return None, text


def normalised(text: str) -> dict[str, Any]:
    """The input as plain JSON data (tuples become lists): exactly what was hashed and checked."""
    return json.loads(text)


def input_hash(text: str) -> str:
    """The hash an input is remembered by (idempotency, confirmations)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def longest_list(value: object) -> int:
    """The length of the longest list anywhere in ``value`` (0 when there is none)."""
    longest, stack = 0, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            longest = max(longest, len(item))
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    return longest


def too_many_items(tool: Tool, value: dict[str, Any]) -> Refused | None:
    """Step 4: a ``too_many_items`` answer when a list is longer than ``max_items``."""
    if tool.max_items is None:
        return None
    longest = longest_list(value)
    if longest <= tool.max_items:
        return None
    return Refused(
        "too_many_items",
        f"{tool.name!r} accepts at most {tool.max_items} items per call, got {longest};"
        " split the list into several calls",
        {"max_items": tool.max_items, "got": longest},
    )


def cost_of(tool: Tool, value: dict[str, Any]) -> int:
    """Rate-limit units of a call: the tool's fixed cost, its function's answer, or the rule."""
    if isinstance(tool.cost, int):
        return tool.cost
    if callable(tool.cost):
        try:
            units = tool.cost(value)
            if isinstance(units, int) and not isinstance(units, bool) and units > 0:
                return units
            log.warning("cost function of %r answered %r; using the default rule", tool.name, units)
        except Exception:  # a broken cost function falls back to the default rule
            log.exception("cost function of %r failed; using the default rule", tool.name)
    if tool.audience == "admin" and tool.is_write:
        return max(1, math.ceil(longest_list(value) / 50))
    return 1


def window_start(now: float, window: float) -> int:
    """The rate-limit window of ``window`` seconds that ``now`` falls in, named by when it
    started, in milliseconds since the epoch: a name that means the same whatever window length
    another process uses, so retention tells ended windows by time alone."""
    return int(now // window * window * 1000)


def budgets(caller: Caller) -> tuple[str, ...]:
    """The rate-limit budgets a call of ``caller`` is charged to: its own, and for a key its
    owner's too (``user:<id>``), so a user's keys share one budget beside each key's own."""
    if caller.kind == "key" and caller.user_id is not None:
        return (caller.identity, f"user:{caller.user_id}")
    return (caller.identity,)


HoldRule: TypeAlias = Literal[
    "person", "operator", "always", "input", "input or batch", "batch", "never"
]
"""When calls of a tool are held, before any input is known (``hold_rule``)."""


def hold_rule(tool: Tool, caller: Caller, settings: Settings | None = None) -> HoldRule:
    """``needs_hold`` as far as it goes without an input: ``person`` (a session's write: the
    agent acts for a person), ``operator`` (a key's write while the setting ``hold_key_writes``
    holds them all), ``always`` (``danger="always"``), ``input`` (a danger check decides per
    input), ``batch`` (an admin write with a list longer than ``confirm_batch_over``), ``input
    or batch`` (both: the batch rule holds whatever an admin write's danger check says), or
    ``never``. The one statement of the hold rule, for every door (docs/concepts/hold-rule.md)."""
    if tool.is_write and caller.kind == "session":
        return "person"
    if tool.is_write and caller.kind == "key" and settings is not None and settings.hold_key_writes:
        return "operator"
    if tool.danger == "always":
        return "always"
    batch = tool.audience == "admin" and tool.is_write
    if callable(tool.danger):
        return "input or batch" if batch else "input"
    return "batch" if batch else "never"


def needs_hold(
    tool: Tool, caller: Caller, value: dict[str, Any], ctx: CallContext
) -> bool | Quorum:
    """Step 7's rule (``hold_rule``, decided for this input): a session's write, a danger that
    holds, or a batch over the setting; the ``Quorum`` a danger check returned, as it said.

    A danger check that raises holds the call: when in doubt, ask a person.
    """
    rule = hold_rule(tool, caller, ctx.settings)
    if rule in ("person", "operator") and callable(tool.danger):
        return _quorum(tool, value, ctx) or True  # held anyway: asked only for its quorum
    if rule in ("person", "operator", "always"):
        return True
    over = longest_list(value) > ctx.settings.confirm_batch_over
    if rule in ("batch", "input or batch") and over:
        return True
    if rule in ("input", "input or batch"):
        try:
            check = tool.danger
            said = check(value, ctx) if callable(check) else False
            return said if isinstance(said, Quorum) else bool(said)
        except Exception:  # fail safe: a broken check asks a person
            log.exception("danger check of %r failed; holding the call", tool.name)
            return True
    return False


def _quorum(tool: Tool, value: dict[str, Any], ctx: CallContext) -> Quorum | None:
    """The ``Quorum`` the danger check asks of a call held whatever it says, or None."""
    try:
        said = tool.danger(value, ctx)  # type: ignore[misc,operator]  # the caller checked callable
    except Exception as exc:  # held all the same; the tool's own quorum applies
        log.warning("danger check of %r failed (%r); it is held all the same", tool.name, exc)
        return None
    return said if isinstance(said, Quorum) else None


def _kind(value: object) -> str:
    return {dict: "an object", list: "an array", str: "a string", type(None): "null"}.get(
        type(value), type(value).__name__
    )
