"""The interrupt's payload and the resume value of ``await_confirmation`` (versioned contract).

The graph stops with one interrupt per round listing every held call. It is resumed with
``Command(resume={confirmation_id: decision})`` where a decision is ``"approve"``, ``"reject"``,
``{"action": "reject", "message": "..."}`` or ``{"action": "edit", "arguments": {...}}``.
LangGraph validates the resume value against ``resume_schema(ids)`` before anything is saved: an
unknown id or a malformed decision is refused with a clear error and can be answered again.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from pydantic import RootModel, ValidationError, model_validator

from turnkit.registry.confirmations import Decision
from turnkit.registry.json_limits import MAX_DEPTH, json_problem
from turnkit.registry.ledger import Confirmation
from turnkit.turn.state import HeldCall

__all__ = [
    "HOW_TO_RESUME",
    "PAYLOAD_TYPE",
    "PAYLOAD_VERSION",
    "payload",
    "refusals",
    "resume_schema",
    "unstorable",
]

PAYLOAD_VERSION = 1
"""Bumped whenever the payload or the resume value changes shape."""
PAYLOAD_TYPE = "turnkit.confirmations"

HOW_TO_RESUME = (
    "Command(resume={<confirmation_id>: 'approve' | 'reject' | {'action': 'reject', 'message': ...}"
    " | {'action': 'edit', 'arguments': {...}}}); an id left out stays held"
)


@lru_cache(maxsize=256)
def resume_schema(ids: tuple[str, ...]) -> type[RootModel[Any]]:
    """The resume value for ``ids``: a map from some of those ids to a decision.

    An id that is not held in the thread is refused with a message naming the held ones.
    """

    class Decisions(RootModel[dict[str, Decision]]):
        @model_validator(mode="before")
        @classmethod
        def _held_ids_only(cls, value: Any) -> Any:
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
    problem = json_problem(value, max_depth=MAX_DEPTH + 3)  # {id: {"arguments": {...}}}
    return [] if problem is None else [f"the value is not plain JSON within the limits: {problem}"]


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


def payload(entries: list[tuple[HeldCall, Confirmation]], titles: dict[str, str]) -> dict[str, Any]:
    """What the person sees: each held call's id, tool, title, exact arguments and expiry."""
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
            }
            for held, confirmation in entries
        ],
        "resume": HOW_TO_RESUME,
    }
