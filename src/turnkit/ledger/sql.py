"""What every backend shares below the ledger's operations: the two statements they are written
over (``Statements``), and values as every backend stores them: JSON text and bounded free text
(SQLite and PostgreSQL)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

from turnkit.registry.json_text import ascii_compact

__all__ = ["Statements", "dump", "load", "text"]


class Statements(Protocol):
    """The two primitives a ledger's operations are written over (every ``Ledger`` has them):
    what ``ApiKeys`` and ``ThreadLeases`` are given, so they need not know the ledger class."""

    def _run(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Execute one statement; return the number of rows it changed."""
        ...

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Execute one query; return its rows."""
        ...


def dump(value: Any) -> str:
    """JSON text safe for any database: ASCII, so lone surrogates and NUL travel escaped."""
    return ascii_compact(value)


def load(text: str | None) -> Any:
    """The value ``dump`` stored (None for a NULL column)."""
    return None if text is None else json.loads(text)


def text(value: str | None, limit: int = 2000) -> str | None:
    """A free-text column value that every backend stores: valid UTF-8, no NUL, bounded."""
    if value is None:
        return None
    clean = value[:limit].encode("utf-8", "backslashreplace").decode("utf-8")
    return clean.replace("\x00", "\\x00")
