"""Notification targets and the outbox (``OutboxRows``, a part of every ``Ledger``).

The outbox's rows are written by triggers on ``turnkit_confirmations`` (``schema.SQLITE_TRIGGERS``,
``schema.POSTGRES_TRIGGERS``), in the transaction of the statement that holds, decides, expires
or finishes a confirmation: an event that happened has its rows, one that did not has none. Here
they are claimed, marked sent or failed, and given up (dead) by the dispatcher (``turnkit.notify``).

A row goes ``pending`` -> ``sending`` (claimed by one worker until ``claimed_until``) -> ``sent``,
or back to ``pending`` with a later ``next_at`` when an attempt failed, or ``dead`` when the
attempts are spent. A ``sending`` row whose claim ran out (its worker died mid-send) is claimable
again: the one way a notification is sent twice (at least once; docs/architecture.md
§12).
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from turnkit.ledger.sql import dump, load, text

__all__ = [
    "Delivery",
    "DeliveryState",
    "NotifyEvent",
    "NotifyKind",
    "NotifyTarget",
    "OutboxRows",
]

NotifyEvent: TypeAlias = Literal["held", "decided", "expired", "ran"]
"""What happened to a confirmation: held (stored, pending), decided (approved, edited, rejected
or forbidden), expired (nobody decided in time), ran (its approved write finished)."""
NotifyKind: TypeAlias = Literal["webhook", "slack", "email"]
"""How a target is told: a signed webhook, a Slack incoming webhook, an email."""
DeliveryState: TypeAlias = Literal["pending", "sending", "sent", "dead"]
"""Where an outbox row is: waiting (maybe for a retry), claimed by a worker, delivered, given up."""

_TARGET_COLUMNS = "id, name, kind, config, events, include, created_at"
_DELIVERY_COLUMNS = (
    "id, event, confirmation_id, status, target_id, created_at, state, attempts, next_at,"
    " claimed_by, claimed_until, last_error, sent_at"
)
_CLAIMABLE = "((state = 'pending' AND next_at <= ?) OR (state = 'sending' AND claimed_until <= ?))"


@dataclass(frozen=True, kw_only=True, slots=True)
class NotifyTarget:
    """Where notifications go, as the ledger keeps it."""

    id: str
    """``tgt_`` and hex digits; part of each delivery's id."""
    name: str
    """The operator's name for it (``turnkit notify add KIND NAME``), unique."""
    kind: NotifyKind
    """How it is told."""
    config: dict[str, Any]
    """Its settings: ``url`` and ``secret`` (webhook), ``url`` (Slack), or ``smtp_host``,
    ``smtp_port``, ``from``, ``to``, ``starttls``, ``user``, ``password_env`` (email)."""
    events: tuple[NotifyEvent, ...]
    """The events it is told of."""
    include: tuple[str, ...] = ()
    """What a notification to it may carry beyond the default fields: ``arguments``, ``preview``,
    ``context``. None by default: a held write's input leaves only when asked for."""
    created_at: float = 0.0
    """When it was added (seconds since the epoch)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Delivery:
    """One outbox row: one event of one confirmation for one target."""

    id: str
    """``{confirmation_id}:{event}:{target_id}``: stable, so receivers de-duplicate by it."""
    event: NotifyEvent
    """What happened."""
    confirmation_id: str
    """The confirmation it happened to."""
    status: str
    """The confirmation's status right after the event."""
    target_id: str
    """Who is told."""
    created_at: float
    """When the event was written (the database's clock)."""
    state: DeliveryState = "pending"
    """Where the row is."""
    attempts: int = 0
    """Claims so far (an attempt counts when claimed, so a worker killed mid-send counts)."""
    next_at: float = 0.0
    """When it may be tried (again)."""
    claimed_by: str | None = None
    """The worker sending it, while ``sending``."""
    claimed_until: float | None = None
    """When that claim runs out and another worker may take the row."""
    last_error: str | None = None
    """Why the last attempt failed."""
    sent_at: float | None = None
    """When it was delivered."""


class OutboxRows(ABC):
    """The targets and outbox operations of a ledger, in SQL over ``_run`` and ``_rows``."""

    _claim_lock = ""
    """Appended to the claim's inner ``SELECT`` (PostgreSQL: ``FOR UPDATE SKIP LOCKED``, so two
    workers claiming at once take different rows instead of queueing on the same ones)."""

    @abstractmethod
    def _run(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Execute one statement; return the number of rows it changed."""

    @abstractmethod
    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Execute one query; return its rows."""

    # --- targets ----------------------------------------------------------------------------

    def add_notify_target(
        self,
        name: str,
        kind: NotifyKind,
        config: dict[str, Any],
        *,
        events: Collection[NotifyEvent],
        include: Collection[str] = (),
        now: float,
    ) -> NotifyTarget | None:
        """Add a target; None (nothing added) when one of that name exists. The values are
        taken as given: ``turnkit.notify.targets`` checks them first."""
        target = NotifyTarget(
            id=f"tgt_{uuid.uuid4().hex[:16]}",
            name=name,
            kind=kind,
            config=dict(config),
            events=tuple(events),
            include=tuple(include),
            created_at=now,
        )
        added = self._run(
            f"INSERT INTO turnkit_notify_targets ({_TARGET_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT DO NOTHING",
            (
                target.id, name, kind, dump(target.config), _set(target.events),
                _set(target.include), now,
            ),
        )  # fmt: skip
        return target if added == 1 else None

    def notify_targets(self) -> list[NotifyTarget]:
        """Every target, by name."""
        rows = self._rows(f"SELECT {_TARGET_COLUMNS} FROM turnkit_notify_targets ORDER BY name")
        return [_target(row) for row in rows]

    def notify_target(
        self, *, name: str | None = None, id: str | None = None
    ) -> NotifyTarget | None:
        """The target of that name (or id), or None."""
        column, value = ("name", name) if name is not None else ("id", id)
        rows = self._rows(
            f"SELECT {_TARGET_COLUMNS} FROM turnkit_notify_targets WHERE {column} = ?", (value,)
        )
        return _target(rows[0]) if rows else None

    def remove_notify_target(self, name: str) -> bool:
        """Remove the target ``name`` and its outbox rows (sent or not: nobody will be told)."""
        target = self.notify_target(name=name)
        if target is None:
            return False
        self._run("DELETE FROM turnkit_outbox WHERE target_id = ?", (target.id,))
        return self._run("DELETE FROM turnkit_notify_targets WHERE id = ?", (target.id,)) == 1

    def delivery_counts(self) -> dict[str, dict[str, int]]:
        """Outbox rows per target id and state (``{"tgt_...": {"pending": 3, "sent": 10}}``)."""
        rows = self._rows(
            "SELECT target_id, state, COUNT(*) FROM turnkit_outbox GROUP BY target_id, state"
        )
        counts: dict[str, dict[str, int]] = {}
        for target_id, state, count in rows:
            counts.setdefault(target_id, {})[state] = int(count)
        return counts

    # --- deliveries -------------------------------------------------------------------------

    def deliveries(
        self, *, confirmation_id: str | None = None, state: DeliveryState | None = None
    ) -> list[Delivery]:
        """Outbox rows, oldest first; only of one confirmation, or in one state, when given."""
        where, params = ["1 = 1"], list[Any]()
        for column, value in (("confirmation_id", confirmation_id), ("state", state)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        rows = self._rows(
            f"SELECT {_DELIVERY_COLUMNS} FROM turnkit_outbox WHERE {' AND '.join(where)}"
            " ORDER BY created_at, id",
            params,
        )
        return [_delivery(row) for row in rows]

    def claim_deliveries(
        self, worker: str, now: float, lease_seconds: float, limit: int = 20
    ) -> list[Delivery]:
        """Claim up to ``limit`` due rows for ``worker`` until ``now + lease_seconds``: pending
        ones whose ``next_at`` has come, and sending ones whose claim ran out. One conditional
        statement: the outer ``WHERE`` checks again that each row is still claimable (PostgreSQL
        evaluates it again after waiting for a row's lock), so two workers in two processes
        never both claim a row while its claim holds. The rows are chosen once, in a
        materialized ``WITH`` (a ``LIMIT`` in an ``IN (...)`` may be evaluated again by
        PostgreSQL's plan and claim more). Each claim counts as an attempt."""
        rows = self._rows(
            "WITH chosen AS MATERIALIZED (SELECT id FROM turnkit_outbox"
            f" WHERE {_CLAIMABLE} ORDER BY next_at, created_at LIMIT ?{self._claim_lock})"
            " UPDATE turnkit_outbox SET state = 'sending', claimed_by = ?, claimed_until = ?,"
            " attempts = attempts + 1 WHERE id IN (SELECT id FROM chosen)"
            f" AND {_CLAIMABLE} RETURNING {_DELIVERY_COLUMNS}",
            (now, now, limit, worker, now + lease_seconds, now, now),
        )
        return sorted((_delivery(row) for row in rows), key=lambda d: (d.created_at, d.id))

    def delivered(self, delivery_id: str, worker: str, now: float) -> bool:
        """Mark a row ``worker`` claimed as sent; False when it is no longer its claim."""
        return (
            self._run(
                "UPDATE turnkit_outbox SET state = 'sent', sent_at = ?, claimed_by = NULL,"
                " claimed_until = NULL, last_error = NULL"
                " WHERE id = ? AND state = 'sending' AND claimed_by = ?",
                (now, delivery_id, worker),
            )
            == 1
        )

    def failed(self, delivery_id: str, worker: str, error: str, next_at: float | None) -> bool:
        """Record a failed attempt of a row ``worker`` claimed: pending again from ``next_at``,
        or ``dead`` when ``next_at`` is None (no attempt left). False when it is no longer its
        claim."""
        state = "dead" if next_at is None else "pending"
        return (
            self._run(
                "UPDATE turnkit_outbox SET state = ?, next_at = ?, last_error = ?,"
                " claimed_by = NULL, claimed_until = NULL"
                " WHERE id = ? AND state = 'sending' AND claimed_by = ?",
                (state, next_at or 0.0, text(error, 500), delivery_id, worker),
            )
            == 1
        )

    def dead_letters(self) -> list[Delivery]:
        """The rows given up on, oldest first."""
        return self.deliveries(state="dead")

    def retry_dead(self, delivery_id: str) -> bool:
        """Make a dead row pending again, due now, with its attempts counted from zero."""
        return (
            self._run(
                "UPDATE turnkit_outbox SET state = 'pending', next_at = 0, attempts = 0"
                " WHERE id = ? AND state = 'dead'",
                (delivery_id,),
            )
            == 1
        )


def _set(values: Collection[str]) -> str:
    """``,a,b,``: a set a ``LIKE '%,a,%'`` finds a member of (``,`` when empty)."""
    return "," + "".join(f"{value}," for value in values)


def _members(stored: str) -> tuple[str, ...]:
    return tuple(value for value in stored.split(",") if value)


def _target(row: tuple[Any, ...]) -> NotifyTarget:
    tid, name, kind, config, events, include, created_at = row
    return NotifyTarget(
        id=tid,
        name=name,
        kind=kind,
        config=load(config),
        events=_members(events),  # type: ignore[arg-type]  # written from NotifyEvent values
        include=_members(include),
        created_at=float(created_at),
    )


def _delivery(row: tuple[Any, ...]) -> Delivery:
    (did, event, cid, status, target_id, created_at, state, attempts, next_at, claimed_by,
     claimed_until, last_error, sent_at) = row  # fmt: skip
    return Delivery(
        id=did,
        event=event,
        confirmation_id=cid,
        status=status,
        target_id=target_id,
        created_at=float(created_at),
        state=state,
        attempts=int(attempts),
        next_at=float(next_at),
        claimed_by=claimed_by,
        claimed_until=None if claimed_until is None else float(claimed_until),
        last_error=last_error,
        sent_at=None if sent_at is None else float(sent_at),
    )
