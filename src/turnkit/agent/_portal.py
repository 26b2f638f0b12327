"""A private event loop in a daemon thread: sync callers run coroutines there with a timeout.

Every ``Agent`` runs every turn on the process's one portal (``shared_portal()``), from ``prompt``
and ``aprompt`` alike. That gives sync code real cancellation on timeout (the run is cancelled, not
abandoned in a thread), and keeps loop-bound resources on one loop that outlives every agent:
langchain-openai keeps **one** async HTTP client per process, whose pooled keep-alive connections
belong to the loop that opened them, so agents each on a loop of their own failed from the second
one on ("Event loop is closed", "bound to a different event loop").
"""

from __future__ import annotations

import asyncio
import atexit
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class Portal:
    """An event loop running in its own daemon thread until ``close()``."""

    def __init__(self, name: str = "turnkit-portal") -> None:
        self._closed = False
        self.pid = os.getpid()
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
            raise RuntimeError("this portal is closed")

    def close(self) -> None:
        """Stop the loop and its thread."""
        if self._closed:
            return
        self._closed = True
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()


_shared: Portal | None = None
_shared_lock = threading.Lock()


def shared_portal() -> Portal:
    """The process's portal, started on first use (and again in a forked child process)."""
    global _shared
    with _shared_lock:
        if _shared is None or _shared.closed or _shared.pid != os.getpid():
            _shared = Portal()
            atexit.register(_shared.close)
        return _shared
