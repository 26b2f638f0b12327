"""LangChain's human-in-the-loop shapes, so LangChain's own UIs can decide turnkit's held calls.

``HumanInTheLoopMiddleware`` (``langchain.agents.middleware``) interrupts with an ``HITLRequest``:
``action_requests`` (``name``, ``args``, ``description``) and ``review_configs``
(``action_name``, ``allowed_decisions``, ``args_schema``), one entry per held call. It is resumed
with an ``HITLResponse``: ``{"decisions": [...]}``, one decision per action request, in their order:
``{"type": "approve"}``, ``{"type": "edit", "edited_action": {"name", "args"}}`` or
``{"type": "reject", "message": "..."}`` (Agent Chat UI sends these). Agent Inbox, reading the same
request, sends ``{"type": "approve", "args": ...}``, ``{"type": "reject", "args": "<message>"}``
and ``{"type": "edit", "args": {"action": <name>, "args": {...}}}``: read too.

Plain data, no LangChain import: ``hitl_request`` builds the fields, ``hitl_decisions`` turns a
response into turnkit's one grammar of decisions (``Decision``), refusing with a clear message
(``ValueError``) a wrong count, an unknown type, a malformed entry, or an edit naming another tool.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, NamedTuple

from pydantic import ValidationError

from turnkit.executor.confirmations import Decision
from turnkit.registry.json_text import canonical

__all__ = [
    "ALLOWED_DECISIONS",
    "HOW_TO_DECIDE",
    "Asked",
    "StaleDecisions",
    "describe",
    "hitl_decisions",
    "hitl_request",
    "is_response",
]

ALLOWED_DECISIONS = ("approve", "edit", "reject")
"""What a person may decide on any held call."""
HOW_TO_DECIDE = (
    "{'decisions': [{'type': 'approve'} | {'type': 'edit', 'edited_action': {'name': ..., 'args':"
    " {...}}} | {'type': 'reject', 'message': ...}]}, one per action request, in their order"
)
_KEYS = {"approve": {"type", "args"}, "reject": {"type", "message", "args"}}
_KEYS["edit"] = {"type", "edited_action", "args"}


class StaleDecisions(ValueError):
    """More decisions than calls still waiting, by no more than the calls of the round settled
    since (decided elsewhere, expired, or decided before a crash): the person may have been
    asked about those too, so the positions no longer say which decision is for which call.
    The round is asked again. With nothing settled, a longer list is a wrong count
    (``ValueError``), refused as a shorter one is."""


class Asked(NamedTuple):
    """One held call as the person was asked about it (one action request)."""

    confirmation_id: str
    name: str
    """The model-facing tool name (``action_requests[i].name``): the only name an edit may use."""
    args: str = "null"
    """The arguments asked about (``action_requests[i].args``, what an approve runs) as
    canonical JSON (the tuple stays hashable: resume schemas are remembered per round)."""


def hitl_request(
    name: str,
    args: dict[str, Any],
    description: str,
    args_schema: dict[str, Any],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(action_request, review_config)`` of one held call."""
    request = {"name": name, "args": args, "description": description}
    config = {
        "action_name": name,
        "allowed_decisions": list(ALLOWED_DECISIONS),
        "args_schema": args_schema,
    }
    return request, config


def describe(
    title: str, name: str, args: dict[str, Any], expires_at: str, problem: str | None
) -> str:
    """What the person reads about a held call: what it does, with what, until when."""
    text = (
        f"{title} ({name}) waits for your decision until {expires_at}. It will run with exactly"
        f" these arguments: {json.dumps(args, ensure_ascii=False, sort_keys=True)}"
    )
    return f"{text}\nThe last decision was not applied: {problem}" if problem else text


def is_response(value: object) -> bool:
    """True when ``value`` is written as an ``HITLResponse`` (a map whose one key is
    ``decisions``), not as turnkit's map of confirmation ids."""
    return isinstance(value, dict) and list(value) == ["decisions"]


def hitl_decisions(
    value: dict[str, Any], asked: Sequence[Asked], settled: int = 0
) -> dict[str, Decision]:
    """The decision for each asked confirmation id, from an ``HITLResponse`` ``value``.

    Args:
        value: the ``HITLResponse``.
        asked: the calls still waiting, in the order of the action requests.
        settled: how many other calls of the round are settled already (decided elsewhere,
            expired): the person may have been asked about them as well.

    Raises:
        StaleDecisions: more decisions than ``asked``, by at most ``settled``: the round
            shrank since the person was asked, and must be asked again.
        ValueError: ``value`` is not one valid decision per asked call, in their order; the
            message says what is wrong, and with which entry.
    """
    decisions = value["decisions"]
    if not isinstance(decisions, list):
        raise ValueError(f"'decisions' must be a list of decisions, got {type(decisions).__name__}")
    if len(decisions) != len(asked):
        names = [call.name for call in asked]
        shrank = len(asked) < len(decisions) <= len(asked) + settled
        raise (StaleDecisions if shrank else ValueError)(
            f"{len(decisions)} decisions for {len(asked)} held calls {names}: send one decision"
            " per action request, in their order"
        )
    return {call.confirmation_id: _one(i, entry, call) for i, (entry, call) in enumerate(
        zip(decisions, asked, strict=True))}  # fmt: skip


def _one(index: int, entry: object, call: Asked) -> Decision:
    where = f"decisions[{index}] ({call.name})"
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: a decision is an object with a 'type', got {entry!r:.80}")
    kind = entry.get("type")
    if kind not in _KEYS:
        raise ValueError(
            f"{where}: 'type' must be one of {list(ALLOWED_DECISIONS)}, got {kind!r:.40}"
        )
    unknown = sorted(map(str, set(entry) - _KEYS[kind]))
    if unknown:
        raise ValueError(f"{where}: {unknown} are not fields of a {kind!r} decision")
    if kind == "approve":
        return _approve(where, entry, call)
    if kind == "reject":
        return _reject(where, entry)
    return _edit(where, entry, call)


def _approve(where: str, entry: dict[str, Any], call: Asked) -> Decision:
    """Approve runs the arguments asked about. Agent Inbox echoes them in ``args``
    (``{"action": name, "args": {...}}``); other arguments there are refused, never dropped."""
    echoed = entry.get("args")
    if isinstance(echoed, dict) and "args" in echoed and _canonical(echoed["args"]) != call.args:
        raise ValueError(
            f"{where}: an approve runs the arguments asked about; to change them send"
            " {'type': 'edit', 'edited_action': {'name': ..., 'args': {...}}}"
        )
    return Decision.approve()


def _canonical(value: Any) -> str | None:
    """``value`` in the canonical JSON inputs are hashed in; None when it is not plain JSON."""
    try:
        return canonical(value)
    except (TypeError, ValueError):
        return None


def _reject(where: str, entry: dict[str, Any]) -> Decision:
    message = entry.get("message", entry.get("args"))  # Agent Inbox puts it in 'args'
    if message is not None and not isinstance(message, str):
        raise ValueError(f"{where}: a rejection's 'message' is text, got {message!r:.80}")
    return Decision.reject(message or None)


def _edit(where: str, entry: dict[str, Any], call: Asked) -> Decision:
    action = entry.get("edited_action")
    if action is None and isinstance(entry.get("args"), dict):  # Agent Inbox
        inbox = entry["args"]
        action = {"name": inbox.get("action"), "args": inbox.get("args")}
    if not isinstance(action, dict) or not isinstance(action.get("args"), dict):
        raise ValueError(
            f"{where}: an edit needs 'edited_action': {{'name': {call.name!r}, 'args': {{...}}}}"
        )
    if action.get("name") != call.name:
        raise ValueError(
            f"{where}: an edit may change the arguments, not the tool: 'edited_action.name' must"
            f" be {call.name!r}, got {action.get('name')!r:.80}"
        )
    try:
        return Decision.edit(action["args"])
    except ValidationError as exc:
        problem = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
        raise ValueError(f"{where}: {problem}") from None
