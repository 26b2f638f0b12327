"""Plain records the ledger returns: a confirmation and an idempotency record."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, TypeAlias

from turnkit.registry.caller import Caller

__all__ = ["Confirmation", "ConfirmationStatus", "IdempotencyRecord", "caller_from_json", "iso"]

ConfirmationStatus: TypeAlias = Literal["pending", "running", "done", "rejected", "expired"]
"""``pending`` until decided; ``running`` while an approved write runs; then ``done``,
or ``rejected`` / ``expired`` without a write."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Confirmation:
    """A write held for a person's decision, as the ledger keeps it."""

    id: str
    """The confirmation's uuid."""
    caller: Caller
    """Who made the held call; the approved write runs as them, with rights checked again."""
    tool: str
    """The registry name of the held tool."""
    input: dict[str, Any]
    """The exact validated input that will run on approval (an edit replaces it)."""
    input_hash: str
    """Hash of the canonical JSON of ``input``."""
    idempotency_key: str | None
    """The held call's idempotency key, whose record gets the final outcome."""
    status: ConfirmationStatus
    """Where the confirmation is in its life."""
    created_at: float
    """When it was held (seconds since the epoch)."""
    expires_at: float
    """When it stops being decidable."""
    decided_at: float | None = None
    """When a person decided."""
    decided_by: str | None = None
    """The identity of the decider."""
    decision: dict[str, Any] | None = None
    """What was decided: ``{"kind": "approve" | "reject" | "edit", ...}``."""
    outcome: dict[str, Any] | None = None
    """The stored answer once decided and run; returned on every repeat."""

    @property
    def expires_at_iso(self) -> str:
        """``expires_at`` as an ISO 8601 UTC timestamp."""
        return iso(self.expires_at)


@dataclass(frozen=True, kw_only=True, slots=True)
class IdempotencyRecord:
    """What the ledger remembers of one idempotency key of one caller and tool."""

    input_hash: str
    """Hash of the input first sent with the key."""
    state: Literal["running", "done"]
    """``running`` while the first call is under way; ``done`` once its answer is stored."""
    answer: dict[str, Any] | None
    """The stored answer (``done`` only)."""
    created_at: float
    """When the key was first seen."""


def iso(timestamp: float) -> str:
    """Seconds since the epoch as an ISO 8601 UTC timestamp with a ``Z``."""
    moment = datetime.fromtimestamp(timestamp, tz=UTC)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def caller_to_json(caller: Caller) -> dict[str, Any]:
    """A caller as JSON data for the ledger."""
    return {
        "kind": caller.kind,
        "user_id": caller.user_id,
        "key_id": caller.key_id,
        "scopes": sorted(caller.scopes),
        "client_id": caller.client_id,
    }


def caller_from_json(data: dict[str, Any]) -> Caller:
    """The caller that ``caller_to_json`` stored."""
    return Caller(
        kind=data["kind"],
        user_id=data.get("user_id"),
        key_id=data.get("key_id"),
        scopes=frozenset(data.get("scopes") or ()),
        client_id=data.get("client_id"),
    )
