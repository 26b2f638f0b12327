"""Async twins of the ledger's sync methods: run in a worker thread, or on the loop when the
ledger does not block (``Ledger.blocking``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

__all__ = ["async_twin"]

P = ParamSpec("P")
R = TypeVar("R")


def async_twin(method: Callable[P, R]) -> Callable[P, Coroutine[Any, Any, R]]:
    async def twin(*args: P.args, **kwargs: P.kwargs) -> R:
        if not args[0].blocking:  # type: ignore[attr-defined]  # args[0] is the ledger
            return method(*args, **kwargs)
        return await asyncio.to_thread(method, *args, **kwargs)

    twin.__name__ = f"a{method.__name__}"
    twin.__doc__ = (
        f"Async twin of ``{method.__name__}``: runs it in a worker thread (on the loop when the"
        " ledger does not block)."
    )
    return twin
