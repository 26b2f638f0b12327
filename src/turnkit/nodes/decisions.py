"""The interrupt's payload and the resume value of ``await_confirmation`` (versioned contract).

The graph stops with one interrupt per round listing every held call. It is resumed with
``Command(resume={confirmation_id: decision})`` where a decision is ``"approve"``, ``"reject"``,
``{"action": "reject", "message": "..."}`` or ``{"action": "edit", "arguments": {...}}``.
LangGraph validates the resume value against ``resume_schema(ids)`` before anything is saved: an
unknown id or a malformed decision is refused with a clear error and can be answered again.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, ValidationError, model_validator

from turnkit.nodes.tools import arguments
from turnkit.registry.confirmations import Decision
from turnkit.registry.json_limits import MAX_DEPTH, json_problem
from turnkit.registry.ledger import Confirmation

__all__ = [
    "HOW_TO_RESUME",
    "PAYLOAD_TYPE",
    "PAYLOAD_VERSION",
    "decision_of",
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


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Approve(_Strict):
    """Run the held call as it is."""

    action: Literal["approve"]


class Reject(_Strict):
    """Run nothing; the message tells the model why."""

    action: Literal["reject"]
    message: str | None = None


class Edit(_Strict):
    """Run the same tool with these arguments instead (validated again)."""

    action: Literal["edit"]
    arguments: dict[str, Any]


GraphDecision = (
    Literal["approve", "reject"] | Annotated[Approve | Reject | Edit, Field(discriminator="action")]
)


@lru_cache(maxsize=256)
def resume_schema(ids: tuple[str, ...]) -> type[RootModel[Any]]:
    """The resume value for ``ids``: a map from some of those ids to a decision.

    An id that is not held in the thread is refused with a message naming the held ones.
    """

    class Decisions(RootModel[dict[str, GraphDecision]]):  # type: ignore[misc]
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
        if not loc:  # the value as a whole
            return [problem["msg"].removeprefix("Value error, ")]
        field = ".".join(part for part in loc[1:] if "[" not in part and part not in _ACTIONS)
        detail = f"{field}: {problem['msg']}" if field else ""
        if detail or loc[0] not in by_id:
            by_id[loc[0]] = detail or "not a decision"
    return [f"{cid!r}: {text}" for cid, text in list(by_id.items())[:5]]


_ACTIONS = frozenset({"approve", "reject", "edit"})


def decision_of(value: Any) -> Decision:
    """The executor's ``Decision`` for one validated resume decision."""
    if value == "approve" or isinstance(value, Approve):
        return Decision.approve()
    if value == "reject":
        return Decision.reject()
    if isinstance(value, Reject):
        return Decision.reject(value.message)
    return Decision.edit(arguments(value.arguments) or {})


def payload(
    entries: list[tuple[dict[str, Any], Confirmation]], titles: dict[str, str]
) -> dict[str, Any]:
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
