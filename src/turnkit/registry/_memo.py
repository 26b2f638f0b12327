"""``remember``: the small bounded cache of the hot paths (tool lists, bound models, settings)."""

from __future__ import annotations

from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


def remember(cache: dict[K, V], key: K, value: V, *, limit: int) -> V:
    """Store ``value`` under ``key`` and return it; ``cache`` is emptied first when it holds
    ``limit`` entries. Safe when threads share ``cache`` (each step is one atomic dict operation;
    trimming by iteration could raise ``dictionary changed size``), and a cache emptied costs only
    recomputing what is asked next."""
    if len(cache) >= limit:
        cache.clear()
    cache[key] = value
    return value
