"""The interrupt's payload and the resume value of ``await_confirmation`` (versioned contract).

The graph stops with one interrupt per round listing every held call. It is resumed with
``Command(resume={confirmation_id: decision})`` where a decision is ``"approve"``, ``"reject"``,
``{"action": "reject", "message": "..."}`` or ``{"action": "edit", "arguments": {...}}``.
The payload also carries LangChain's ``HITLRequest`` fields (``action_requests``,
``review_configs``: ``hitl.py``), one entry per asked call in the order of ``confirmations``, and
the resume value may be LangChain's ``HITLResponse`` instead (``{"decisions": [...]}``, one per
action request, in that order), so LangChain's UIs (Agent Chat UI, Agent Inbox) decide them.
LangGraph validates the resume value against ``resume_schema(ids, asked)`` before anything is
saved: an unknown id, a wrong count or a malformed decision is refused with a clear error and can
be answered again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from pydantic import RootModel, ValidationError, model_validator

from turnkit.executor.confirmations import Decision
from turnkit.ledger import Confirmation
from turnkit.registry.json_limits import MAX_DEPTH, json_problem
from turnkit.registry.json_text import canonical
from turnkit.registry.names import model_name
from turnkit.registry.tool import Tool
from turnkit.turn.hitl import (
    HOW_TO_DECIDE,
    Asked,
    describe,
    hitl_decisions,
    hitl_request,
    is_response,
)
from turnkit.turn.state import HeldCall

__all__ = [
    "HOW_TO_RESUME",
    "PAYLOAD_TYPE",
    "PAYLOAD_VERSION",
    "asked",
    "payload",
    "refusals",
    "resume_schema",
    "unstorable",
]

PAYLOAD_VERSION = 1
"""Bumped whenever the payload or the resume value changes in a way that breaks a reader or a
writer of the previous version. Fields added beside the versioned ones (LangChain's
``action_requests`` and ``review_configs``) and a resume form accepted beside the old one (an
``HITLResponse``) keep it: every version-1 payload field and resume value means what it meant."""
PAYLOAD_TYPE = "turnkit.confirmations"

HOW_TO_RESUME = (
    "Command(resume={<confirmation_id>: 'approve' | 'reject' | {'action': 'reject', 'message': ...}"
    " | {'action': 'edit', 'arguments': {...}}}); an id left out stays held. Or, as LangChain's"
    f" HITL middleware is resumed: Command(resume={HOW_TO_DECIDE})"
)


@lru_cache(maxsize=256)
def resume_schema(ids: tuple[str, ...], asked: tuple[Asked, ...] = ()) -> type[RootModel[Any]]:
    """The resume value for ``ids``: a map from some of those ids to a decision, or an
    ``HITLResponse`` with one decision per ``asked`` call, in their order.

    An id that is not held in the thread is refused with a message naming the held ones. An
    ``HITLResponse`` with more decisions than ``asked`` is stale (``StaleDecisions``) only when
    calls of ``ids`` that are not asked (settled since) could account for the extra ones; else
    it is a wrong count.
    """
    settled = len(ids) - len(asked)

    class Decisions(RootModel[dict[str, Decision]]):
        @model_validator(mode="before")
        @classmethod
        def _held_ids_only(cls, value: Any) -> Any:
            problem = json_problem(value, max_depth=_nesting(value), other=_stored)
            if problem is not None:  # read no further: repr and json.dumps overflow on it
                raise ValueError(f"the resume value is not plain JSON within the limits: {problem}")
            if is_response(value):
                return hitl_decisions(value, asked, settled)
            if not isinstance(value, dict):
                raise ValueError(
                    f"the resume value must map confirmation ids to decisions, got"
                    f" {type(value).__name__}"
                )
            unknown = sorted(map(str, set(value) - set(ids)))
            if unknown:
                raise ValueError(f"{unknown} are not confirmations held in this thread")
            return value

    return Decisions


def unstorable(value: Any) -> list[str]:
    """Why a resume value cannot be kept (LangGraph stores it before any node runs, so a value
    beyond turnkit's JSON limits fails there, with a bare ``TypeError``): one line per problem."""
    problem = json_problem(value, max_depth=_nesting(value))
    return [] if problem is None else [f"the value is not plain JSON within the limits: {problem}"]


def _nesting(value: Any) -> int:
    """How deep a resume value may nest: an edit's arguments, up to ``MAX_DEPTH`` levels, sit at
    level 3 of ``{id: {"arguments": {...}}}`` and at level 5 of an ``HITLResponse``
    (``{"decisions": [{"edited_action": {"args": {...}}}]}``); one level to spare."""
    return MAX_DEPTH + (5 if is_response(value) else 3)


def _stored(value: object) -> str | None:
    """Any other object LangGraph stored in a resume value (a ``Decision``) is the schema's to
    judge: only its containers are walked."""
    return None


def refusals(error: ValidationError) -> list[str]:
    """What was wrong with a resume value, one short line per confirmation id (at most five)."""
    by_id: dict[str, str] = {}
    for problem in error.errors():
        loc = [str(part) for part in problem["loc"]]
        message = str(problem["msg"]).removeprefix("Value error, ")
        if not loc:  # the value as a whole
            return [message]
        field = ".".join(loc[1:])
        by_id.setdefault(loc[0], f"{field}: {message}" if field else message)
    return [f"{cid!r}: {text}" for cid, text in list(by_id.items())[:5]]


def asked(entries: list[tuple[HeldCall, Confirmation]]) -> tuple[Asked, ...]:
    """The asked calls of ``entries``, in the order of the payload's action requests."""
    return tuple(Asked(c.id, model_name(c.tool) or c.tool, canonical(c.input)) for _, c in entries)


PREVIEW_SHOWN = 1000
"""The most characters of a preview's JSON written into a HITL request's description."""


def for_approvers(confirmation: Confirmation) -> dict[str, Any]:
    """What a person deciding sees beyond the arguments, as the payload's keys: who the caller
    is (when not the person asked: a key's user and name), the tool's preview and, for a write
    that needs several, its approvals. Never the model's to read: the payload goes to the
    person (an interrupt), not into the conversation."""
    shown: dict[str, Any] = {}
    if confirmation.caller.kind != "session":  # a session's person is the one asked
        shown["caller"] = confirmation.caller_label()
    if confirmation.preview is not None:
        shown["preview"] = confirmation.preview.to_json()
    if confirmation.approvals_needed > 1 or confirmation.separate_duties:
        shown["approvals"] = {
            "given": confirmation.approvals_given,
            "needed": confirmation.approvals_needed,
            "separate_duties": confirmation.separate_duties,
        }
    return shown


def approver_lines(confirmation: Confirmation) -> list[str]:
    """The same in words, for a HITL request's description."""
    lines = []
    preview = confirmation.preview
    if preview is not None and preview.unavailable is not None:
        lines.append(f"Preview unavailable: {preview.unavailable}")
    elif preview is not None:
        text = preview.value if preview.truncated else json.dumps(preview.value, sort_keys=True)
        cut = len(text) > PREVIEW_SHOWN or preview.truncated
        lines.append(f"What it would change: {text[:PREVIEW_SHOWN]}{' (cut)' if cut else ''}")
    if confirmation.approvals_needed > 1:
        lines.append(
            f"It needs {confirmation.approvals_needed} people's approval"
            f" ({confirmation.approvals_given} given)"
        )
    if confirmation.separate_duties:
        lines.append(f"{confirmation.caller_label()} may not approve it (separate duties)")
    return lines


def payload(entries: list[tuple[HeldCall, Confirmation]], tools: dict[str, Tool]) -> dict[str, Any]:
    """What the person sees: each held call's id, tool, title, exact arguments and expiry; and
    the same calls as LangChain's ``HITLRequest`` (``action_requests``, ``review_configs``)."""
    requests, configs = [], []
    for (held, confirmation), call in zip(entries, asked(entries), strict=True):
        tool = tools.get(confirmation.tool)
        title = (tool.title if tool else None) or confirmation.tool
        text = describe(
            title, call.name, confirmation.input, confirmation.expires_at_iso, held.get("problem")
        ) + "".join(f"\n{line}" for line in approver_lines(confirmation))
        schema = dict(tool.input_schema) if isinstance(tool, Tool) and isinstance(
            tool.input_schema, Mapping) else {"type": "object"}  # fmt: skip
        request, config = hitl_request(call.name, confirmation.input, text, schema)
        requests.append(request)
        configs.append(config)
    titles = {name: (tool.title or name) for name, tool in tools.items()}
    return {
        "version": PAYLOAD_VERSION,
        "type": PAYLOAD_TYPE,
        "confirmations": [
            {
                "confirmation_id": confirmation.id,
                "tool": confirmation.tool,
                "title": titles.get(confirmation.tool, confirmation.tool),
                "arguments": confirmation.input,
                "expires_at": confirmation.expires_at_iso,
                "tool_call_id": held["tool_call_id"],
                **({"problem": held["problem"]} if held.get("problem") else {}),
                **for_approvers(confirmation),
            }
            for held, confirmation in entries
        ],
        "resume": HOW_TO_RESUME,
        "action_requests": requests,
        "review_configs": configs,
    }
