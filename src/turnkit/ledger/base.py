"""``Ledger``: confirmations, idempotency records, rate-limit usage, settings and the audit trail.

The operations are written once here in SQL; a backend only supplies two primitives (``_run`` for
a statement's row count, ``_rows`` for a query's rows) and its connection handling. Every method
is sync; its ``a``-prefixed twin runs it in a worker thread so async code never blocks its loop.
"""

from __future__ import annotations

import sqlite3
import time
from abc import ABC, abstractmethod
from collections.abc import Collection, Sequence
from typing import Any, ParamSpec, TypeVar

from turnkit.ledger.audit import AuditRows
from turnkit.ledger.confirmations import ConfirmationRows
from turnkit.ledger.keys import ApiKey, ApiKeys
from turnkit.ledger.leases import ThreadLeases
from turnkit.ledger.outbox import OutboxRows
from turnkit.ledger.records import (
    IdempotencyRecord,
)
from turnkit.ledger.schema import INDEXES, SQLITE_TABLES, SQLITE_TRIGGERS, column_additions
from turnkit.ledger.sql import dump, load, text
from turnkit.ledger.twins import async_twin
from turnkit.registry import ids

__all__ = ["AUDIT_SQL", "Ledger", "overrides_of"]

P = ParamSpec("P")
R = TypeVar("R")


AUDIT_SQL = (
    "INSERT INTO turnkit_audit (id, at, caller_identity, tool, status, code, duration_ms,"
    " confirmation_id, detail, trace_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
"""One audit row's insert (``Ledger._append_audit``)."""


def overrides_of(rows: Sequence[Sequence[Any]]) -> dict[str, Any]:
    """The settings overrides in the rows of ``SELECT key, value FROM turnkit_settings``."""
    return {key: load(value) for key, value in rows}


class Ledger(ConfirmationRows, OutboxRows, AuditRows, ABC):
    """The durable memory of the executor. Use ``SqliteLedger`` or ``PostgresLedger``."""

    blocking = True
    """Whether a statement may wait on a disk or a server: async code then runs it in a worker
    thread (``MemoryLedger``'s run on the event loop)."""
    _audit_row = "rowid"
    """What names one audit row for pruning (``retention.py``): SQLite's rowid, which every
    shape of its table has (a new one has no key on ``id``, ``schema.SQLITE_AUDIT``)."""

    @abstractmethod
    def _run(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Execute one statement; return the number of rows it changed."""

    @abstractmethod
    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Execute one query; return its rows."""

    @abstractmethod
    def close(self) -> None:
        """Release the connections."""

    def setup(self) -> None:
        """Create the tables when they do not exist, add the columns a ledger made by an older
        turnkit lacks (``schema.ADDED_COLUMNS``), the indexes and the outbox's triggers; safe to
        call again, from several processes (SQLite's; ``PostgresLedger`` does it in one locked
        transaction)."""
        for statement in SQLITE_TABLES:
            self._run(statement)
        self._upgrade()
        for statement in (*INDEXES, *SQLITE_TRIGGERS):
            self._run(statement)

    def _upgrade(self) -> None:
        """Add the columns of ``schema.ADDED_COLUMNS`` the tables lack."""
        for statement in column_additions(self._columns):
            try:
                self._run(statement)
            except sqlite3.OperationalError as exc:  # another process added it just now
                if "duplicate column" not in str(exc):
                    raise

    def _columns(self, table: str) -> set[str]:
        """The names of ``table``'s columns (SQLite's ``PRAGMA``; PostgreSQL reads its own)."""
        return {str(row[1]) for row in self._rows(f"PRAGMA table_info({table})")}

    @property
    def keys(self) -> ApiKeys:
        """The API keys kept in this ledger's database (``turnkit keys``, ``turnkit serve``)."""
        return ApiKeys(self)

    def api_key(self, key_id: str) -> ApiKey | None:
        """The API key ``key_id`` as the ledger keeps it now (revoked or expired too), or None."""
        return self.keys.get(key_id)

    def thread_leases(self, ttl: float = 30.0) -> ThreadLeases:
        """Thread leases in this ledger's database (one writer per thread, ``ledger/leases.py``):
        lock rows that expire ``ttl`` seconds after their last renewal."""
        return ThreadLeases(self, ttl)

    # --- settings ---------------------------------------------------------------------------

    def settings(self) -> dict[str, Any]:
        """The operator's setting overrides."""
        return overrides_of(self._rows("SELECT key, value FROM turnkit_settings"))

    def set_setting(self, key: str, value: Any) -> None:
        """Override setting ``key`` with the JSON value ``value``, effective on the next call."""
        self._run(
            "INSERT INTO turnkit_settings (key, value) VALUES (?, ?)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, dump(value)),
        )

    def clear_setting(self, key: str) -> None:
        """Remove the override of ``key``; the default applies again."""
        self._run("DELETE FROM turnkit_settings WHERE key = ?", (key,))

    # --- idempotency ------------------------------------------------------------------------

    def reserve_idempotency(
        self, identity: str, tool: str, key: str, input_hash: str, now: float
    ) -> IdempotencyRecord | None:
        """Reserve ``key`` for this call; None when reserved, else the record already there."""
        inserted = self._run(
            "INSERT INTO turnkit_idempotency"
            " (caller_identity, tool, key, input_hash, state, answer, created_at)"
            " VALUES (?, ?, ?, ?, 'running', NULL, ?) ON CONFLICT DO NOTHING",
            (identity, tool, key, input_hash, now),
        )
        return None if inserted == 1 else self.get_idempotency(identity, tool, key)

    def get_idempotency(self, identity: str, tool: str, key: str) -> IdempotencyRecord | None:
        """The record of ``key`` for this caller and tool, or None."""
        rows = self._rows(
            "SELECT input_hash, state, answer, created_at FROM turnkit_idempotency"
            " WHERE caller_identity = ? AND tool = ? AND key = ?",
            (identity, tool, key),
        )
        if not rows:
            return None
        input_hash, state, answer, created_at = rows[0]
        return IdempotencyRecord(
            input_hash=input_hash, state=state, answer=load(answer), created_at=created_at
        )

    def store_idempotency(self, identity: str, tool: str, key: str, answer: dict[str, Any]) -> None:
        """Store the answer given under ``key``; repeats replay it from now on."""
        self._run(
            "UPDATE turnkit_idempotency SET state = 'done', answer = ?"
            " WHERE caller_identity = ? AND tool = ? AND key = ?",
            (dump(answer), identity, tool, key),
        )

    def restart_idempotency(self, identity: str, tool: str, key: str, now: float) -> None:
        """Count a running reservation from ``now``: its handler starts only now, after slow
        checks, and a repeat measures by ``created_at`` whether the call is still alive."""
        self._run(
            "UPDATE turnkit_idempotency SET created_at = ?"
            " WHERE caller_identity = ? AND tool = ? AND key = ? AND state = 'running'",
            (now, identity, tool, key),
        )

    def abandon_idempotency(
        self, identity: str, tool: str, key: str, answer: dict[str, Any], before: float
    ) -> bool:
        """Store ``answer`` for a reservation whose call stopped before ``before`` (a dead process,
        a cancelled call), so repeats get it instead of waiting."""
        return (
            self._run(
                "UPDATE turnkit_idempotency SET state = 'done', answer = ?"
                " WHERE caller_identity = ? AND tool = ? AND key = ? AND state = 'running'"
                " AND created_at < ?",
                (dump(answer), identity, tool, key, before),
            )
            == 1
        )

    def release_idempotency(self, identity: str, tool: str, key: str) -> None:
        """Forget a reservation whose call did nothing (rate-limited), so a retry can run."""
        self._run(
            "DELETE FROM turnkit_idempotency"
            " WHERE caller_identity = ? AND tool = ? AND key = ? AND state = 'running'",
            (identity, tool, key),
        )

    # --- rate limits ------------------------------------------------------------------------

    def charge(self, identity: str, window_start: int, units: int, limit: int) -> bool:
        """Add ``units`` to the caller's window when the total stays within ``limit``.

        Returns False (and charges nothing) when the window has no room for them.
        """
        if units > limit:
            return False
        return (
            self._run(
                "INSERT INTO turnkit_rate_usage (caller_identity, window_start, units)"
                " VALUES (?, ?, ?) ON CONFLICT (caller_identity, window_start) DO UPDATE"
                " SET units = turnkit_rate_usage.units + excluded.units"
                " WHERE turnkit_rate_usage.units + excluded.units <= ?",
                (identity, window_start, units, limit),
            )
            == 1
        )

    def charge_all(
        self, identities: Sequence[str], window_start: int, units: int, limit: int
    ) -> bool:
        """``charge`` each of ``identities`` (a key and its user's budget): all or none, in one
        statement; when one has no room, those it charged are given their units back."""
        if units > limit:
            return False
        rows = ", ".join("(?, ?, ?)" for _ in identities)
        charged = self._rows(
            f"INSERT INTO turnkit_rate_usage (caller_identity, window_start, units) VALUES {rows}"
            " ON CONFLICT (caller_identity, window_start) DO UPDATE"
            " SET units = turnkit_rate_usage.units + excluded.units"
            " WHERE turnkit_rate_usage.units + excluded.units <= ? RETURNING caller_identity",
            (*(v for identity in identities for v in (identity, window_start, units)), limit),
        )
        if len(charged) == len(identities):
            return True
        self.refund_all([row[0] for row in charged], window_start, units)
        return False

    def refund_all(self, identities: Sequence[str], window_start: int, units: int) -> None:
        """Give back ``units`` charged to each of ``identities`` in the window (a hold that
        will not run, a charge that did not fit in every budget)."""
        if not identities:
            return
        marks = ", ".join("?" for _ in identities)
        self._run(
            "UPDATE turnkit_rate_usage SET units = CASE WHEN units > ? THEN units - ? ELSE 0 END"
            f" WHERE window_start = ? AND caller_identity IN ({marks})",
            (units, units, window_start, *identities),
        )

    def forget_usage(self, before_window: int) -> int:
        """Forget usage kept outside the database for windows before ``before_window``; how
        many windows were forgotten (none here: the rows are pruned with the tables)."""
        return 0

    def usage(self, identity: str, window_start: int) -> int:
        """Units the caller has spent in the window starting at ``window_start``."""
        rows = self._rows(
            "SELECT units FROM turnkit_rate_usage WHERE caller_identity = ? AND window_start = ?",
            (identity, window_start),
        )
        return int(rows[0][0]) if rows else 0

    def pending_count(self, now: float) -> int:
        """How many confirmations wait for a decision and have not expired at ``now`` (the
        ``turnkit.holds.pending`` gauge reads it at each scrape)."""
        rows = self._rows(
            "SELECT COUNT(*) FROM turnkit_confirmations WHERE status = 'pending'"
            " AND expires_at > ?",
            (now,),
        )
        return int(rows[0][0])

    # --- audit ------------------------------------------------------------------------------

    def audit(
        self,
        *,
        at: float,
        caller: str,
        tool: str,
        status: str,
        code: str | None,
        duration_ms: float,
        confirmation_id: str | None = None,
        detail: str | None = None,
        trace_id: str | None = None,
    ) -> None:
        """Append one audit row: who called what, how it ended, how long it took, and the trace
        of the call's span (32 hex digits) when one was recorded."""
        self._append_audit(
            (
                f"{time.time_ns():020d}-{ids.random_hex(48)}",  # sorts in insertion order
                at, text(caller), text(tool, 200), status, code, duration_ms, confirmation_id,
                text(detail), trace_id,
            )
        )  # fmt: skip

    def _append_audit(self, row: tuple[Any, ...]) -> None:
        """Insert one audit row, the parameters of ``AUDIT_SQL`` (``MemoryLedger`` batches)."""
        self._run(AUDIT_SQL, row)

    def audit_rows(
        self, limit: int = 100, *, confirmation_ids: Collection[str] | None = None
    ) -> list[dict[str, Any]]:
        """The latest audit rows, newest first; only those of ``confirmation_ids`` when given
        (the rows of held calls and of their approved runs). To filter, page or export:
        ``audit_page`` and ``audit_stream`` (``ledger/audit.py``)."""
        names = (
            "at",
            "caller",
            "tool",
            "status",
            "code",
            "duration_ms",
            "confirmation_id",
            "detail",
            "trace_id",
        )
        where, params = "", list[Any]()
        if confirmation_ids is not None:
            if not confirmation_ids:
                return []
            where = f" WHERE confirmation_id IN ({', '.join('?' for _ in confirmation_ids)})"
            params = list(confirmation_ids)
        rows = self._rows(
            f"SELECT {', '.join(('at', 'caller_identity', *names[2:]))} FROM turnkit_audit"
            f"{where} ORDER BY at DESC, id DESC LIMIT ?",
            (*params, limit),
        )
        return [dict(zip(names, row, strict=True)) for row in rows]

    asettings = async_twin(settings)
    aset_setting = async_twin(set_setting)
    aaudit_rows = async_twin(audit_rows)
