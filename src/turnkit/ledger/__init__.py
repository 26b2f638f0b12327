"""The ledger: confirmations, idempotency records, rate-limit usage, settings and audit rows.

One schema, two backends: ``SqliteLedger`` (a file; the default) and ``PostgresLedger``.
``open_ledger(url)`` picks one from a URL or a path. ``MemoryLedger`` keeps an executor's own
ledger, when it is given none, in the process's memory.
"""

from __future__ import annotations

import os

from turnkit.ledger.base import Ledger
from turnkit.ledger.memory import MemoryLedger
from turnkit.ledger.records import Approval, Confirmation, IdempotencyRecord, Preview
from turnkit.ledger.sqlite import SqliteLedger
from turnkit.ledger.urls import parse_url

__all__ = [
    "Approval",
    "Confirmation",
    "IdempotencyRecord",
    "Ledger",
    "MemoryLedger",
    "Preview",
    "SqliteLedger",
    "open_ledger",
]


def open_ledger(url: str | os.PathLike[str]) -> Ledger:
    """A ledger for ``url``: ``postgresql://...``, ``sqlite:///path``, or a SQLite file path.

    Raises:
        StorageError: ``url`` is none of the accepted forms, or names nothing that can be opened.

    Examples:
        >>> open_ledger("/tmp/turnkit-doctest.sqlite")
        SqliteLedger('/tmp/turnkit-doctest.sqlite')
    """
    kind, target = parse_url(url)
    if kind == "postgres":
        from turnkit.ledger.postgres import PostgresLedger

        return PostgresLedger(target)
    return SqliteLedger(target)
