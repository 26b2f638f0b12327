"""Retention: what the ledger forgets, and when (``turnkit ledger prune``).

Kept for ``retention_days`` (a setting, default 30) after they stop mattering, then deleted:
decided confirmations (done, rejected, expired, refused) and pending ones long past their expiry;
notifications sent or given up (the outbox's ``sent`` and ``dead`` rows); idempotency records
(a repeat after that runs anew: keep the window longer than any retry, at least the IETF
draft's 24 hours, hence a minimum of one day) — except the record of a held call
whose confirmation is still open (pending or running), however old: its repeat must replay the
hold, never make a second one. Deleted as soon as they are over:
sign-ins of the web inbox that expired, and rate-limit windows that started over a day ago (they
ended, whatever window length a process uses), and the approvals of confirmations deleted.
Audit rows only when the
operator opts in with ``audit_retention_days`` (0, the default, keeps them for good).

Never deleted: pending and running confirmations still in their time, API keys (revoked ones
included: their ids stay in the audit) and thread leases (their fencing tokens must not restart).

Safe while servers run: each table is pruned in batches of ``BATCH`` rows, one short statement
each, every row chosen by a condition no live call can still meet.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from turnkit.ledger.base import Ledger

__all__ = ["BATCH", "Pruned", "prune"]

BATCH = 1000
"""Rows deleted per statement (short statements: no call waits long on a lock)."""
DAY = 86400.0


@dataclass(frozen=True, kw_only=True, slots=True)
class Pruned:
    """How many rows of each kind were deleted (or, in a dry run, would be)."""

    confirmations: int = 0
    """Decided confirmations, and pending ones expired, older than the retention."""
    idempotency: int = 0
    """Idempotency records older than the retention."""
    sessions: int = 0
    """Expired sign-ins of the web inbox."""
    usage: int = 0
    """Rate-limit windows that ended."""
    audit: int = 0
    """Audit rows older than ``audit_retention_days`` (0 unless opted in)."""
    approvals: int = 0
    """Approvals of confirmations that were deleted."""
    notifications: int = 0
    """Notifications sent or given up (dead) before the retention: the outbox's done rows."""

    def as_dict(self) -> dict[str, int]:
        """The counts as JSON data."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


_TARGETS: dict[str, tuple[str, str, str]] = {
    # kind: (table, key columns, condition on "?" = the cutoff)
    "confirmations": (
        "turnkit_confirmations",
        "id",
        "((status IN ('done', 'rejected', 'expired', 'forbidden')"
        " AND COALESCE(decided_at, expires_at) < ?) OR (status = 'pending' AND expires_at < ?))",
    ),
    "idempotency": (
        "turnkit_idempotency",
        "caller_identity, tool, key",
        "created_at < ? AND NOT EXISTS (SELECT 1 FROM turnkit_confirmations c"
        " WHERE c.caller_identity = turnkit_idempotency.caller_identity"
        " AND c.tool = turnkit_idempotency.tool AND c.idempotency_key = turnkit_idempotency.key"
        " AND c.status IN ('pending', 'running'))",
    ),
    "sessions": ("turnkit_key_sessions", "token_hash", "expires_at <= ?"),
    "usage": ("turnkit_rate_usage", "caller_identity, window_start", "window_start < ?"),
    "audit": ("turnkit_audit", "", "at < ?"),  # the ledger's own (``Ledger._audit_row``)
    "notifications": ("turnkit_outbox", "id", "state IN ('sent', 'dead') AND created_at < ?"),
    "approvals": (
        "turnkit_approvals",
        "confirmation_id, approver",
        "NOT EXISTS (SELECT 1 FROM turnkit_confirmations c"
        " WHERE c.id = turnkit_approvals.confirmation_id)",
    ),
}


def prune(
    ledger: Ledger,
    *,
    now: float,
    retention_days: float,
    audit_retention_days: float = 0.0,
    rate_limit_window: float = 60.0,
    dry_run: bool = False,
) -> Pruned:
    """Delete what the retention rules above let go; return how many of each.

    Args:
        now: seconds since the epoch.
        retention_days: how long decided confirmations and idempotency records are kept.
        audit_retention_days: how long audit rows are kept; 0 keeps them for good.
        rate_limit_window: the ledger's window length: windows that started more than a day
            (or one such window, when longer) before ``now`` have ended.
        dry_run: count, delete nothing.
    """
    retained = now - retention_days * DAY
    ended = int((now - max(DAY, rate_limit_window)) * 1000)  # windows are named by their start
    cutoffs: dict[str, tuple[Any, ...]] = {
        "confirmations": (retained, retained),
        "idempotency": (retained,),
        "sessions": (now,),
        "usage": (ended,),
    }
    if audit_retention_days > 0:
        cutoffs["audit"] = (now - audit_retention_days * DAY,)
    cutoffs["notifications"] = (retained,)
    cutoffs["approvals"] = ()  # after the confirmations: those whose confirmation went
    counts = {
        kind: _count(ledger, kind, cutoff) if dry_run else _delete(ledger, kind, cutoff)
        for kind, cutoff in cutoffs.items()
    }
    if not dry_run:  # a ledger that keeps usage in memory too (MemoryLedger)
        counts["usage"] += ledger.forget_usage(ended)
    return Pruned(**counts)


def _count(ledger: Ledger, kind: str, cutoff: tuple[Any, ...]) -> int:
    table, _, condition = _TARGETS[kind]
    rows = ledger._rows(f"SELECT COUNT(*) FROM {table} WHERE {condition}", cutoff)
    return int(rows[0][0])


def _delete(ledger: Ledger, kind: str, cutoff: tuple[Any, ...]) -> int:
    table, key, condition = _TARGETS[kind]
    key = key or ledger._audit_row
    chosen = f"({key})" if "," in key else key
    statement = (
        f"DELETE FROM {table} WHERE {chosen} IN"
        f" (SELECT {key} FROM {table} WHERE {condition} LIMIT ?)"
    )
    total = 0
    while True:
        deleted = ledger._run(statement, (*cutoff, BATCH))
        total += max(deleted, 0)
        if deleted < BATCH:
            return total
