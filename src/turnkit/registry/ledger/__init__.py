"""The ledger: confirmations, idempotency records, rate-limit usage, settings and audit rows.

One schema, two backends: ``SqliteLedger`` (a file; the default) and ``PostgresLedger``.
``open_ledger(url)`` picks one from a URL or a path.
"""

from __future__ import annotations

import os

from turnkit.registry.ledger.base import Ledger
from turnkit.registry.ledger.records import Confirmation, IdempotencyRecord
from turnkit.registry.ledger.sqlite import SqliteLedger

__all__ = ["Confirmation", "IdempotencyRecord", "Ledger", "SqliteLedger", "open_ledger"]


def open_ledger(url: str | os.PathLike[str]) -> Ledger:
    """A ledger for ``url``: ``postgresql://...``, ``sqlite:///path``, or a file path.

    Example:
        >>> open_ledger("/tmp/turnkit-doctest.sqlite")
        SqliteLedger('/tmp/turnkit-doctest.sqlite')
    """
    text = os.fspath(url)
    if text.startswith(("postgresql://", "postgres://")):
        from turnkit.registry.ledger.postgres import PostgresLedger

        return PostgresLedger(text)
    if text.startswith("sqlite:///"):
        text = text.removeprefix("sqlite:///")
    elif "://" in text:
        raise ValueError(
            f"unsupported ledger URL {text!r}: use a file path, sqlite:///path or postgresql://..."
        )
    return SqliteLedger(text)
