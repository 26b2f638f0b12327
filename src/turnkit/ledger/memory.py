"""``MemoryLedger``: a ledger in this process's memory, an ``Executor``'s own when given none.

The same SQL as every ledger, on one in-memory SQLite database shared by the process's threads
(one connection, one lock). Nothing touches the disk and nothing survives the process; a
statement is a few microseconds of CPU, so async code runs it on the event loop instead of in a
worker thread (``blocking = False``).

Since every statement comes through this object, three things cost less than a statement per
call, with the same answers: the operator's settings are remembered until a statement writes
them; rate-limit usage is counted in a dict (``charge``/``usage``, under the lock: the same
check-and-add as the SQL's one conditional upsert); and audit rows wait in a list until a
statement reads the audit (or 64 of them wait) and are inserted together, in one transaction
(a batch the table refuses is dropped and logged). A crash loses them with everything else
this ledger holds.
"""

from __future__ import annotations

import copy
import logging
import sqlite3
import threading
from collections.abc import Sequence
from typing import Any

from turnkit.ledger.base import AUDIT_SQL, Ledger, overrides_of

__all__ = ["MemoryLedger"]

log = logging.getLogger("turnkit.ledger")

AUDIT_BATCH = 64
"""Audit rows that wait at most before they are inserted."""


class MemoryLedger(Ledger):
    """Confirmations, idempotency records, usage, settings and audit rows kept in memory.

    Examples:
        >>> ledger = MemoryLedger()
        >>> ledger.set_setting("confirm_batch_over", 20)
        >>> ledger.settings()["confirm_batch_over"]
        20
    """

    blocking = False

    def __init__(self) -> None:
        self._conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        self._lock = threading.Lock()
        self._settings: dict[str, Any] | None = None  # the overrides, until a statement writes them
        self._audit: list[tuple[Any, ...]] = []  # rows not inserted yet
        self._usage: dict[tuple[str, int], int] = {}  # (caller, window start) -> units spent
        self._closed = False
        self.setup()

    def _run(self, sql: str, params: Sequence[Any] = ()) -> int:
        with self._lock:
            self._before(sql)
            return self._conn.execute(sql, tuple(params)).rowcount

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            self._before(sql)
            return self._conn.execute(sql, tuple(params)).fetchall()

    def _before(self, sql: str) -> None:
        """Under the lock, before ``sql`` runs: the waiting audit rows go in first when it reads
        or writes the audit; the remembered settings are forgotten when it may write them."""
        if self._audit and "turnkit_audit" in sql:
            self._insert_audit()
        if "turnkit_settings" in sql and not sql.lstrip().upper().startswith("SELECT"):
            self._settings = None

    def settings(self) -> dict[str, Any]:
        """The operator's setting overrides (read once, until a statement writes them)."""
        with self._lock:
            if self._settings is None:
                rows = self._conn.execute("SELECT key, value FROM turnkit_settings").fetchall()
                self._settings = overrides_of(rows)
            return copy.deepcopy(self._settings)  # JSON values: nothing shared with the cache

    def charge(self, identity: str, window_start: int, units: int, limit: int) -> bool:
        """As ``Ledger.charge``: add ``units`` to the caller's window when the total stays
        within ``limit``; False (nothing charged) when it has no room."""
        key = (identity, window_start)
        with self._lock:
            self._open()
            spent = self._usage.get(key, 0) + units
            if units > limit or spent > limit:
                return False
            self._usage[key] = spent
            return True

    def charge_all(
        self, identities: Sequence[str], window_start: int, units: int, limit: int
    ) -> bool:
        """As ``Ledger.charge_all``, under one lock: all or none."""
        keys = [(identity, window_start) for identity in identities]
        with self._lock:
            self._open()
            if units > limit or any(self._usage.get(key, 0) + units > limit for key in keys):
                return False
            for key in keys:
                self._usage[key] = self._usage.get(key, 0) + units
            return True

    def refund_all(self, identities: Sequence[str], window_start: int, units: int) -> None:
        """As ``Ledger.refund_all``."""
        with self._lock:
            self._open()
            for identity in identities:
                key = (identity, window_start)
                if key in self._usage:
                    self._usage[key] = max(0, self._usage[key] - units)

    def forget_usage(self, before_window: int) -> int:
        """Forget the usage of windows before ``before_window`` (pruning)."""
        with self._lock:
            self._open()
            old = [key for key in self._usage if key[1] < before_window]
            for key in old:
                del self._usage[key]
            return len(old)

    def usage(self, identity: str, window_start: int) -> int:
        """As ``Ledger.usage``."""
        with self._lock:
            self._open()
            return self._usage.get((identity, window_start), 0)

    def _open(self) -> None:
        """Under the lock: refuse, as SQLite does, once closed."""
        if self._closed:
            raise sqlite3.ProgrammingError("Cannot operate on a closed database.")

    def _append_audit(self, row: tuple[Any, ...]) -> None:
        """Keep the row to insert with the next ones, before the audit is read."""
        with self._lock:
            self._open()
            self._audit.append(row)
            if len(self._audit) >= AUDIT_BATCH:
                self._insert_audit()

    def _insert_audit(self) -> None:
        """Under the lock: insert the waiting rows in one transaction. If that fails (a row the
        table refuses), none is inserted and the batch is dropped, logged: one bad row must not
        stop every later call, as it would if it were tried again forever."""
        rows, self._audit = self._audit, []
        try:
            self._conn.execute("BEGIN")
            self._conn.executemany(AUDIT_SQL, rows)
            self._conn.execute("COMMIT")
        except BaseException:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            log.error("%d audit rows could not be inserted and are lost", len(rows))
            raise

    def close(self) -> None:
        """Forget everything (statements after this raise ``sqlite3.ProgrammingError``)."""
        with self._lock:
            self._closed = True
            self._audit, self._settings, self._usage = [], None, {}
            self._conn.close()

    def __repr__(self) -> str:
        return "MemoryLedger()"
