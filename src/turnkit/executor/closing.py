"""Ending a pending confirmation without a write: rejected, expired, or refused with its key.

Closing is one conditional update (only a pending one closes, once); the one call that closes it
gives back the rate-limit units its hold reserved (``pipeline._hold``). ``expire_overdue`` closes
a caller's holds whose time ran out, so a caller out of room gets the units of holds nobody decided.
"""

from __future__ import annotations

from typing import Any

from turnkit.executor import steps
from turnkit.executor.answers import Answer, Refused
from turnkit.executor.effects import Steps, on_ledger
from turnkit.ledger import Ledger
from turnkit.ledger.records import Confirmation, ConfirmationStatus, Readable, iso
from turnkit.registry.caller import Caller

__all__ = ["close_held", "expire", "expire_overdue"]


def expire_overdue(caller: Caller, now: float) -> Steps[int]:
    """Close ``caller``'s pending confirmations whose time ran out; how many of them gave back
    units they had reserved."""
    found: list[Confirmation] = yield on_ledger(
        Ledger.list_confirmations, status="pending", readable=Readable(identity=caller.identity)
    )
    freed = 0
    for held in found:
        if held.expires_at <= now and (yield from expire(held, now)) and held.reserved_units:
            freed += 1
    return freed


def expire(held: Confirmation, now: float) -> Steps[bool]:
    """Close a pending confirmation whose time ran out (a no-op once decided or closed); whether
    this call closed it."""
    expired = Refused(
        "confirmation_expired",
        f"confirmation {held.id!r} expired at {iso(held.expires_at)}; nothing was run",
    )
    return (yield from close_held(held, "expired", expired, now))


def close_held(
    held: Confirmation,
    status: ConfirmationStatus,
    answer: Answer,
    now: float,
    decider: Caller | str | None = None,
    decision: dict[str, Any] | None = None,
) -> Steps[bool]:
    """End a pending confirmation without a write (rejected, expired, refused) and give back
    the rate-limit units its hold reserved; whether this call closed it."""
    outcome = answer.to_json()  # as the ledger stores it
    closed: bool = yield on_ledger(
        Ledger.close_confirmation,
        held.id,
        status=status,
        outcome=outcome,
        now=now,
        decided_by=decider.identity if isinstance(decider, Caller) else decider,
        decision=decision,
        only_expired=status == "expired",
    )
    if closed and held.reserved_units and held.reserved_window is not None:
        units, window = held.reserved_units, held.reserved_window
        yield on_ledger(Ledger.refund_all, steps.budgets(held.caller), window, units)
    return closed
