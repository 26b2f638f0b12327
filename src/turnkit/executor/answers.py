"""The answers of ``execute`` and ``confirm``: typed values inside, JSON at the doors (§4 of
docs/architecture.md).

Inside the package an answer is one of five frozen values, matched on by type; it becomes JSON
(``to_json``) only where it leaves: ``Executor.execute`` and ``confirm``, the ledger, a tool
message, REST, MCP. ``answer_from_json`` reads back what the ledger stored. Each kind's own
fields are positional, in the order its JSON writes them (``Refused(code, message, details)``);
the marks every kind may carry are keyword-only.

- ``Ran``: ``{"executed": true, "status": "ok", "result": ...}``.
- ``Held``: ``{"executed": false, "status": "confirmation_required", "confirmation_id",
  "expires_at"}``.
- ``DryRun``: ``{"executed": false, "dry_run": true, "would_hold": ..., "cost": ...}``.
- ``Rejected``: ``{"executed": false, "status": "rejected", "message": ...}``.
- ``Refused``: ``{"executed": false, "status": "error", "error": {"code", "message", "details"}}``.

Any of them may carry, last, ``"replayed": true`` (a stored answer given again for a repeated
idempotency key) and ``"already_decided": true`` (a confirmation's stored outcome, for a decision
that came after another one).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal, TypeAlias, cast, get_args

from turnkit.ledger.records import Confirmation

__all__ = [
    "NOTHING_RAN",
    "NO_REASON",
    "Answer",
    "AnswerJSON",
    "DryRun",
    "ErrorCode",
    "Held",
    "Ran",
    "Refused",
    "Rejected",
    "Unreadable",
    "answer_from_json",
    "shown_outcome",
    "stored_outcome",
]

AnswerJSON: TypeAlias = dict[str, Any]
"""An answer as JSON: what ``execute`` and ``confirm`` return, and what the ledger stores."""

ErrorCode: TypeAlias = Literal[
    "not_found",
    "forbidden",
    "invalid_input",
    "too_many_items",
    "idempotency_conflict",
    "in_progress",
    "rate_limited",
    "confirmation_expired",
    "internal_error",
    "timeout",
    "tool_error",
    "outcome_unknown",
    "too_many_pending",
    "cannot_decide_here",
    "arguments_changed",
]
"""Every error code an answer can carry."""

NOTHING_RAN: frozenset[str] = frozenset({"rate_limited", "too_many_pending"})
"""Codes of answers for which nothing was held or run and nothing is kept: the same call may be
sent again, with the same idempotency key, and go ahead."""

NO_REASON = "rejected by a person"
"""A rejection's message when the person gave none."""


@dataclass(frozen=True, kw_only=True, slots=True)
class _Answer:
    """What every answer has: the marks a stored answer may carry when it is given again."""

    status: ClassVar[str]
    """The answer's kind in a word, as its JSON and its audit row write it."""

    replayed: bool = False
    """A stored answer given again for a repeated idempotency key: nothing ran for this call."""
    already_decided: bool = False
    """A confirmation's stored outcome, for a decision that came after another: it changed
    nothing."""

    @property
    def ran_nothing(self) -> bool:
        """True when nothing was held or run and nothing of it is kept (``NOTHING_RAN``): its
        idempotency key is released for a retry."""
        return False

    def to_json(self) -> AnswerJSON:
        """The answer as JSON, as ``execute`` returns it and the ledger stores it."""
        body = self._body()
        if self.replayed:
            body["replayed"] = True
        if self.already_decided:
            body["already_decided"] = True
        return body

    def _body(self) -> AnswerJSON:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class Ran(_Answer):
    """The handler ran and returned ``result``."""

    status: ClassVar[str] = "ok"
    result: Any
    """What the handler returned: JSON data."""

    def _body(self) -> AnswerJSON:
        return {"executed": True, "status": "ok", "result": self.result}


@dataclass(frozen=True, slots=True)
class Held(_Answer):
    """The write waits for a person's confirmation; nothing ran."""

    status: ClassVar[str] = "confirmation_required"
    confirmation_id: str
    """The confirmation in the ledger, decided with ``Executor.confirm``."""
    expires_at: str
    """When it expires undecided (ISO 8601, UTC)."""
    approvals_given: int | None = None
    """To an approver of a write that needs more than one: the approvals that count so far
    (theirs included); None on a hold's own answer."""
    approvals_needed: int | None = None
    """How many it needs (``approvals=N``); None on a hold's own answer."""

    def _body(self) -> AnswerJSON:
        body: AnswerJSON = {
            "executed": False,
            "status": "confirmation_required",
            "confirmation_id": self.confirmation_id,
            "expires_at": self.expires_at,
        }
        if self.approvals_needed is not None:
            body["approvals"] = {"given": self.approvals_given, "needed": self.approvals_needed}
        return body


@dataclass(frozen=True, slots=True)
class DryRun(_Answer):
    """What the call would do (``dry_run``), without doing, charging or holding anything."""

    status: ClassVar[str] = "dry_run"  # its JSON has no status; its audit row says dry_run
    would_hold: bool
    """Whether the call would wait for a person's confirmation."""
    cost: int
    """The rate-limit units it would be charged."""

    def _body(self) -> AnswerJSON:
        return {
            "executed": False,
            "dry_run": True,
            "would_hold": self.would_hold,
            "cost": self.cost,
        }


@dataclass(frozen=True, slots=True)
class Rejected(_Answer):
    """The outcome of a held write a person rejected; nothing ran."""

    status: ClassVar[str] = "rejected"
    message: str = NO_REASON
    """Why, as the person said it (told to the model)."""

    def _body(self) -> AnswerJSON:
        return {"executed": False, "status": "rejected", "message": self.message}


@dataclass(frozen=True, slots=True)
class Refused(_Answer):
    """The call ended with an error ``code`` (``ErrorCode``), at the step that refused it or in
    its handler; ``message`` says what to do."""

    status: ClassVar[str] = "error"
    code: ErrorCode
    """What kind of error (the REST status and the MCP error follow it)."""
    message: str
    """What went wrong, worded for a model or a person to act on."""
    details: dict[str, Any] = field(default_factory=dict)
    """JSON data a model or a client can act on (``violations``, ``retry_after``, ...)."""

    @property
    def ran_nothing(self) -> bool:
        """True for a rate limit or a cap of pending holds (``NOTHING_RAN``)."""
        return self.code in NOTHING_RAN

    def error_json(self) -> dict[str, Any]:
        """The JSON error object: ``{"code", "message", "details"}``."""
        return {"code": self.code, "message": self.message, "details": dict(self.details)}

    def _body(self) -> AnswerJSON:
        return {"executed": False, "status": "error", "error": self.error_json()}


Answer: TypeAlias = Ran | Held | DryRun | Rejected | Refused
"""An answer of ``execute`` or ``confirm``: match on its type."""

_CODES = frozenset(get_args(ErrorCode))
_MARKS = ("replayed", "already_decided")


def answer_from_json(data: object) -> Answer:
    """The answer whose ``to_json()`` is ``data``: how an answer the ledger stored (an
    idempotency record's, a confirmation's outcome) is read back.

    Raises:
        ValueError: ``data`` is not the JSON of an answer (it says what is wrong).
    """
    if not isinstance(data, dict):
        raise _malformed(data, f"not a JSON object but {type(data).__name__}")
    body = {key: value for key, value in data.items() if key not in _MARKS}
    marks = {key: data[key] for key in _MARKS if key in data}
    if any(value is not True for value in marks.values()):
        raise _malformed(data, "'replayed' and 'already_decided' are true when present")
    answer: Answer
    match body:
        case {"executed": True, "status": "ok", "result": result} if len(body) == 3:
            answer = Ran(result)
        case {
            "executed": False,
            "status": "confirmation_required",
            "confirmation_id": str(confirmation_id),
            "expires_at": str(expires_at),
        } if len(body) == 4:
            answer = Held(confirmation_id, expires_at)
        case {
            "executed": False,
            "status": "confirmation_required",
            "confirmation_id": str(confirmation_id),
            "expires_at": str(expires_at),
            "approvals": {"given": int(given), "needed": int(needed)},
        } if len(body) == 5 and len(body["approvals"]) == 2:
            answer = Held(confirmation_id, expires_at, given, needed)
        case {
            "executed": False,
            "dry_run": True,
            "would_hold": bool(would_hold),
            "cost": int(cost),
        } if len(body) == 4 and not isinstance(cost, bool):
            answer = DryRun(would_hold, cost)
        case {"executed": False, "status": "rejected", "message": str(message)} if len(body) == 3:
            answer = Rejected(message)
        case {"executed": False, "status": "error", "error": dict(error)} if len(body) == 3:
            answer = _refused(data, error)
        case _:
            raise _malformed(
                data,
                "its fields fit none of the answers: ok, confirmation_required, dry run,"
                " rejected, error (see turnkit.executor.answers)",
            )
    return replace(answer, **marks) if marks else answer


def _refused(data: dict[str, Any], error: dict[str, Any]) -> Refused:
    match error:
        case {"code": str(code), "message": str(message), "details": dict(details)} if (
            len(error) == 3 and code in _CODES
        ):
            return Refused(cast(ErrorCode, code), message, details)
    raise _malformed(
        data, "its 'error' is not {'code', 'message', 'details'} with a known code (ErrorCode)"
    )


def _malformed(data: object, why: str) -> ValueError:
    shown = repr(data)
    shown = shown if len(shown) <= 200 else shown[:199] + "…"
    return ValueError(f"not the JSON of an answer ({why}): {shown}")


def stored_outcome(confirmation: Confirmation) -> Answer | None:
    """What became of ``confirmation``'s write, as the ledger stored it; None while undecided
    (pending, or approved and still running)."""
    outcome = confirmation.outcome
    return None if outcome is None else answer_from_json(outcome)


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A stored outcome that is not an answer's JSON (a row edited by hand, or written by
    something else): what a person's view shows instead of failing."""

    reason: str
    """Why it is not an answer (``answer_from_json``'s message)."""


def shown_outcome(confirmation: Confirmation) -> Answer | Unreadable | None:
    """``stored_outcome`` for what a person reads (the CLI, the inbox): a row that is not an
    answer's JSON is ``Unreadable``, shown as such, never a traceback. The executor and the turn
    read outcomes strictly (``stored_outcome``)."""
    try:
        return stored_outcome(confirmation)
    except ValueError as exc:
        return Unreadable(str(exc))
