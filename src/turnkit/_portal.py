"""A private event loop in a daemon thread: sync callers run coroutines there with a timeout.

An ``Agent`` runs every turn on its portal, from ``prompt`` and ``aprompt`` alike. That gives sync
code real cancellation on timeout (the run is cancelled, not abandoned in a thread), and keeps
loop-bound resources (aiosqlite, async HTTP clients) on one loop for the agent's whole life.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class Portal:
    """An event loop running in its own daemon thread until ``close()``."""

    def __init__(self, name: str = "turnkit-portal") -> None:
        self._closed = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the portal and wait for its result (from sync code)."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("Portal.run called from the portal's own loop: await it instead")
        self._check_open(coroutine)
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    async def arun(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the portal and await its result (from another event loop)."""
        if threading.current_thread() is self._thread:
            return await coroutine
        self._check_open(coroutine)
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            future.cancel()
            raise

    @property
    def closed(self) -> bool:
        """True once ``close()`` was called."""
        return self._closed

    def _check_open(self, coroutine: Coroutine[Any, Any, Any]) -> None:
        if self._closed:
            coroutine.close()
            raise RuntimeError("this agent is closed: create a new one")

    def close(self) -> None:
        """Stop the loop and its thread."""
        if self._closed:
            return
        self._closed = True
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()
