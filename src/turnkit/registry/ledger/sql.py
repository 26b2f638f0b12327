"""Values as every backend stores them: JSON text and bounded free text (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["dump", "load", "text"]


def dump(value: Any) -> str:
    """JSON text safe for any database: ASCII, so lone surrogates and NUL travel escaped."""
    return json.dumps(value, separators=(",", ":"))


def load(text: str | None) -> Any:
    """The value ``dump`` stored (None for a NULL column)."""
    return None if text is None else json.loads(text)


def text(value: str | None, limit: int = 2000) -> str | None:
    """A free-text column value that every backend stores: valid UTF-8, no NUL, bounded."""
    if value is None:
        return None
    clean = value[:limit].encode("utf-8", "backslashreplace").decode("utf-8")
    return clean.replace("\x00", "\\x00")
