"""The ledger effects of the pipelines (execute, confirm) and the executor, each built by a
function of its own.

``on_ledger.charge(identity, window, cost, limit)`` is the effect ``OnLedger(lambda ledger:
ledger.charge(...))``: typed, and followed by go-to-definition like the lambda. It is built here
rather than where the steps yield it because a lambda makes every local it reads a closure cell of
the generator that holds it, alive as long as the generator: the pipeline's generators are alive
across every handler call, so under 500 concurrent turns their cells were ~14,000 more objects for
the garbage collector to walk. Here the captured values live only as long as the effect.
"""

from __future__ import annotations

from typing import Any

from turnkit.executor.effects import OnLedger
from turnkit.ledger.records import Confirmation, ConfirmationStatus, Readable


def settings() -> OnLedger:
    """The operator's setting overrides."""
    return _SETTINGS


_SETTINGS = OnLedger(lambda ledger: ledger.settings())


def get_confirmation(confirmation_id: str) -> OnLedger:
    """One confirmation, or None."""
    return OnLedger(lambda ledger: ledger.get_confirmation(confirmation_id))


def confirmation_for_token(token: str) -> OnLedger:
    """The running confirmation whose approved write carries ``token``, or None."""
    return OnLedger(lambda ledger: ledger.confirmation_for_token(token))


def create_confirmation(confirmation: Confirmation, max_pending: int | None) -> OnLedger:
    """Store a new pending confirmation within its caller's cap; whether it was stored."""
    return OnLedger(
        lambda ledger: ledger.create_confirmation(confirmation, max_pending=max_pending)
    )


def pending_of(identity: str) -> OnLedger:
    """Every pending confirmation held for ``identity`` (expired ones too), oldest first."""
    readable = Readable(identity=identity)
    return OnLedger(lambda ledger: ledger.list_confirmations(status="pending", readable=readable))


def pending_expiries(identity: str, now: float) -> OnLedger:
    """When each pending confirmation of ``identity`` expires, soonest first."""
    return OnLedger(lambda ledger: ledger.pending_expiries(identity, now))


def use_token(confirmation_id: str, token: str) -> OnLedger:
    """Spend an approved write's run token; whether this call may run it."""
    return OnLedger(lambda ledger: ledger.use_token(confirmation_id, token))


def claim_confirmation(
    confirmation_id: str,
    *,
    decided_by: str,
    decision: dict[str, Any],
    token: str,
    now: float,
    input: dict[str, Any] | None = None,
    input_hash: str | None = None,
    key_id: str | None = None,
) -> OnLedger:
    """Move a pending confirmation to running for one decider (while ``key_id``, when given,
    still works); whether this one won."""
    return OnLedger(
        lambda ledger: ledger.claim_confirmation(
            confirmation_id,
            decided_by=decided_by,
            decision=decision,
            token=token,
            now=now,
            input=input,
            input_hash=input_hash,
            key_id=key_id,
        )
    )


def close_confirmation(
    confirmation_id: str,
    *,
    status: ConfirmationStatus,
    outcome: dict[str, Any],
    now: float,
    decided_by: str | None = None,
    decision: dict[str, Any] | None = None,
    only_expired: bool = False,
) -> OnLedger:
    """End a pending confirmation as rejected or expired; whether it was still pending."""
    return OnLedger(
        lambda ledger: ledger.close_confirmation(
            confirmation_id,
            status=status,
            outcome=outcome,
            now=now,
            decided_by=decided_by,
            decision=decision,
            only_expired=only_expired,
        )
    )


def finish_confirmation(confirmation_id: str, outcome: dict[str, Any]) -> OnLedger:
    """Store an approved write's outcome."""
    return OnLedger(lambda ledger: ledger.finish_confirmation(confirmation_id, outcome))


def reopen_confirmation(confirmation_id: str) -> OnLedger:
    """Put a running confirmation whose write did not start back to pending."""
    return OnLedger(lambda ledger: ledger.reopen_confirmation(confirmation_id))


def abandon_confirmation(confirmation_id: str, outcome: dict[str, Any], before: float) -> OnLedger:
    """Close an approved write whose run stopped before ``before`` with ``outcome``."""
    return OnLedger(lambda ledger: ledger.abandon_confirmation(confirmation_id, outcome, before))


def reserve_idempotency(
    identity: str, tool: str, key: str, input_hash: str, now: float
) -> OnLedger:
    """Reserve ``key`` for a call now; the earlier record when there is one."""
    return OnLedger(lambda ledger: ledger.reserve_idempotency(identity, tool, key, input_hash, now))


def get_idempotency(identity: str, tool: str, key: str) -> OnLedger:
    """The record of ``key``, or None."""
    return OnLedger(lambda ledger: ledger.get_idempotency(identity, tool, key))


def store_idempotency(identity: str, tool: str, key: str, answer: dict[str, Any]) -> OnLedger:
    """Record the answer of the call that holds ``key``."""
    return OnLedger(lambda ledger: ledger.store_idempotency(identity, tool, key, answer))


def restart_idempotency(identity: str, tool: str, key: str, now: float) -> OnLedger:
    """Count a running call's time from ``now`` (its handler starts only now)."""
    return OnLedger(lambda ledger: ledger.restart_idempotency(identity, tool, key, now))


def abandon_idempotency(
    identity: str, tool: str, key: str, answer: dict[str, Any], before: float
) -> OnLedger:
    """Close a call still running since before ``before`` with ``answer``."""
    return OnLedger(lambda ledger: ledger.abandon_idempotency(identity, tool, key, answer, before))


def release_idempotency(identity: str, tool: str, key: str) -> OnLedger:
    """Forget a running call's key (nothing ran for it)."""
    return OnLedger(lambda ledger: ledger.release_idempotency(identity, tool, key))


def charge(identities: tuple[str, ...], window_start: int, units: int, limit: int) -> OnLedger:
    """Charge ``units`` to each budget in the window when they fit under ``limit`` in all;
    whether they did."""
    if len(identities) == 1:
        (identity,) = identities
        return OnLedger(lambda ledger: ledger.charge(identity, window_start, units, limit))
    return OnLedger(lambda ledger: ledger.charge_all(identities, window_start, units, limit))


def refund(identities: tuple[str, ...], window_start: int, units: int) -> OnLedger:
    """Give ``units`` back to each budget in the window (a hold that will not run)."""
    return OnLedger(lambda ledger: ledger.refund_all(identities, window_start, units))


def audit(row: dict[str, Any]) -> OnLedger:
    """Write one audit row (``Ledger.audit``'s fields)."""
    return OnLedger(lambda ledger: ledger.audit(**row))


def get_key(key_id: str) -> OnLedger:
    """The API key ``key_id`` as the ledger keeps it now (revoked or expired too), or None."""
    return OnLedger(lambda ledger: ledger.keys.get(key_id))
