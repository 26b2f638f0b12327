"""The JSON answer envelopes of ``execute`` and ``confirm``, built in one place (§4 of
docs/architecture.md).

Success: ``{"executed": true, "status": "ok", "result": ...}``.
Held: ``{"executed": false, "status": "confirmation_required", "confirmation_id", "expires_at"}``.
Dry run: ``{"executed": false, "dry_run": true, "would_hold": ..., "cost": ...}``.
Rejected: ``{"executed": false, "status": "rejected", "message": ...}``.
Error: ``{"executed": false, "status": "error", "error": {"code", "message", "details"}}``.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

__all__ = [
    "Answer",
    "ErrorCode",
    "dry_run",
    "error",
    "held",
    "is_error",
    "ok",
    "ran_nothing",
    "rejected",
    "replayed",
]

Answer: TypeAlias = dict[str, Any]
"""A JSON object: what ``execute`` and ``confirm`` return, and what the ledger stores."""

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
]
"""Every error code an answer can carry."""

NOTHING_RAN: frozenset[str] = frozenset({"rate_limited", "too_many_pending"})
"""Codes of answers for which nothing was held or run and nothing is kept: the same call may be
sent again, with the same idempotency key, and go ahead."""


def ok(result: Any) -> Answer:
    """The answer of a handler that ran."""
    return {"executed": True, "status": "ok", "result": result}


def error(code: ErrorCode, message: str, **details: Any) -> Answer:
    """An error answer; ``details`` are JSON data a model or a client can act on."""
    return {
        "executed": False,
        "status": "error",
        "error": {"code": code, "message": message, "details": details},
    }


def held(confirmation_id: str, expires_at: str) -> Answer:
    """The answer of a write that waits for a person's confirmation."""
    return {
        "executed": False,
        "status": "confirmation_required",
        "confirmation_id": confirmation_id,
        "expires_at": expires_at,
    }


def dry_run(would_hold: bool, cost: int) -> Answer:
    """What a call would do, without doing, charging or holding anything."""
    return {"executed": False, "dry_run": True, "would_hold": would_hold, "cost": cost}


def rejected(message: str | None) -> Answer:
    """The outcome of a confirmation a person rejected."""
    return {"executed": False, "status": "rejected", "message": message or "rejected by a person"}


def replayed(answer: Answer) -> Answer:
    """A stored answer given again for a repeated idempotency key."""
    return {**answer, "replayed": True}


def is_error(answer: Answer, code: ErrorCode | None = None) -> bool:
    """True when ``answer`` is an error (of ``code``, when given)."""
    if answer.get("status") != "error":
        return False
    return code is None or answer["error"]["code"] == code


def ran_nothing(answer: Answer) -> bool:
    """True when ``answer`` held and ran nothing, and nothing of it is kept (``NOTHING_RAN``):
    a rate limit, a cap of pending holds. Its idempotency key is released for a retry."""
    return answer.get("status") == "error" and answer["error"]["code"] in NOTHING_RAN
