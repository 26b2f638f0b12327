"""turnkit's own HTTP clients for the OpenAI models its Agents use; imported only with them.

langchain-openai gives every ``ChatOpenAI`` made without ``http_async_client`` one async client
cached for the whole process, and a pooled connection belongs to the event loop that opened it.
An Agent runs its turns on turnkit's loop (``_portal``), the application its own code on its own
loop: sharing that client failed with "... is bound to a different event loop" as soon as both
used it (``await model.ainvoke(...)``, then ``await agent.aprompt(...)``).

``LoopLocalClient`` keeps one connection pool per event loop: a request uses the pool of the loop
that sends it (turnkit's, the application's, a forked child's new one), so no connection is ever
used from two loops. One instance serves every model turnkit builds or copies, so agents reuse
each other's keep-alive connections. It keeps httpx's own proxy and certificate settings
(``HTTPS_PROXY``, ``SSL_CERT_FILE``, ...) and the OpenAI SDK's timeouts and limits.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import openai

__all__ = ["LoopLocalClient", "async_client", "sync_client"]


class LoopLocalClient(openai.DefaultAsyncHttpxClient):
    """An async HTTP client with a connection pool per event loop (closed loops' are dropped)."""

    def __init__(self) -> None:
        super().__init__()
        self._pools: dict[asyncio.AbstractEventLoop, openai.DefaultAsyncHttpxClient] = {}
        self._lock = threading.Lock()

    # httpx's own keyword options (stream, auth, follow_redirects) are passed on unchanged
    async def send(self, request: Any, **options: Any) -> Any:
        """Send ``request`` with the pool of the running event loop."""
        return await self._pool().send(request, **options)

    async def aclose(self) -> None:
        """Close the running loop's pool (another request opens a new one)."""
        with self._lock:
            pool = self._pools.pop(asyncio.get_running_loop(), None)
        if pool is not None:
            await pool.aclose()

    def _pool(self) -> openai.DefaultAsyncHttpxClient:
        loop = asyncio.get_running_loop()
        with self._lock:
            for closed in [other for other in self._pools if other.is_closed()]:
                del self._pools[closed]
            pool = self._pools.get(loop)
            if pool is None:
                pool = self._pools[loop] = openai.DefaultAsyncHttpxClient()
            return pool


_lock = threading.Lock()
_async: LoopLocalClient | None = None
_sync: openai.DefaultHttpxClient | None = None


def async_client() -> LoopLocalClient:
    """The process's ``LoopLocalClient``, made on first use."""
    global _async
    with _lock:
        if _async is None:
            _async = LoopLocalClient()
        return _async


def sync_client() -> openai.DefaultHttpxClient:
    """The process's sync client for the models turnkit builds (thread-safe, one pool)."""
    global _sync
    with _lock:
        if _sync is None:
            _sync = openai.DefaultHttpxClient()
        return _sync
