"""``MemoryLedger``: a ledger in this process's memory, an ``Executor``'s own when given none.

The same SQL as every ledger, on one in-memory SQLite database shared by the process's threads
(one connection, one lock). Nothing touches the disk and nothing survives the process; a
statement is a few microseconds of CPU, so async code runs it on the event loop instead of in a
worker thread (``blocking = False``).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from typing import Any

from turnkit.registry.ledger.base import Ledger

__all__ = ["MemoryLedger"]


class MemoryLedger(Ledger):
    """Confirmations, idempotency records, usage, settings and audit rows kept in memory.

    Example:
        >>> ledger = MemoryLedger()
        >>> ledger.set_setting("confirm_batch_over", 20)
        >>> ledger.settings()["confirm_batch_over"]
        20
    """

    blocking = False

    def __init__(self) -> None:
        self._conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        self._lock = threading.Lock()
        self.setup()

    def _run(self, sql: str, params: Sequence[Any] = ()) -> int:
        with self._lock:
            return self._conn.execute(sql, tuple(params)).rowcount

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._conn.execute(sql, tuple(params)).fetchall()

    def close(self) -> None:
        """Forget everything (statements after this raise ``sqlite3.ProgrammingError``)."""
        with self._lock:
            self._conn.close()

    def __repr__(self) -> str:
        return "MemoryLedger()"
