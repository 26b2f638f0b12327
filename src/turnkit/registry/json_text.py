"""JSON text as turnkit writes it, from encoders built once.

``json.dumps`` with any option builds a new ``JSONEncoder`` on every call; on the path every
served call and every turn takes, that was a few hundred bytecodes a call for nothing. The
encoders here are built at import and shared (``JSONEncoder.encode`` keeps no state between
calls, so threads may share one).
"""

from __future__ import annotations

import json
from typing import Any, Final

__all__ = ["COMPACT", "ascii_compact", "canonical", "compact"]

COMPACT: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
"""Compact, non-ASCII kept: what a model or a client reads."""
_CANONICAL: Final = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False
)
_ASCII: Final = json.JSONEncoder(separators=(",", ":"))


def compact(value: Any) -> str:
    """``value``'s compact JSON, non-ASCII kept (``json.dumps(value, ensure_ascii=False,
    separators=(",", ":"))``)."""
    return COMPACT.encode(value)


def canonical(value: Any) -> str:
    """Compact JSON with sorted keys and no NaN or infinity: the form inputs are hashed and
    sized in.

    Raises:
        ValueError: ``value`` holds NaN or an infinity.
    """
    return _CANONICAL.encode(value)


def ascii_compact(value: Any) -> str:
    """Compact JSON in ASCII: lone surrogates and NUL travel escaped, safe for any database."""
    return _ASCII.encode(value)
