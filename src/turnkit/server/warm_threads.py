"""The event loop's worker threads for ``turnkit serve``: the thread that went idle last takes
the next call.

A served call does its blocking work (the key, the charge, the handler, the audit row) in one
worker thread of the loop's default pool (``executor/drivers.py``). ``ThreadPoolExecutor`` hands
work to whichever idle thread wakes first, so once a burst of load has started its six threads,
single calls go round them in turn, each on a thread — and a SQLite connection, one per thread —
that the calls before left cold: a served MCP ``tools/call`` took 1.19-1.25x what the same
process took before the load (``docs/performance.md``, "A server that served load"). Here an
idle thread waits on its own queue, and a call goes to the one that finished last: a quiet
server's calls stay on one warm thread, and a busy one still uses them all.

``use_warm_threads()`` makes it the running loop's default pool; ``turnkit serve`` does so when
its app starts.
"""

from __future__ import annotations

import asyncio
import functools
import os
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from queue import SimpleQueue
from typing import Any

__all__ = ["WarmThreads", "use_warm_threads"]

_Work = tuple[Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]
_FROM_INBOX: Any = object()
"""What an idle thread's next work is until it reads it from its queue."""


class WarmThreads(ThreadPoolExecutor):
    """A ``ThreadPoolExecutor`` (what asyncio accepts as a loop's default pool) of at most
    ``max_workers`` threads, started as work needs them, where the work goes to the thread that
    went idle last; work beyond them waits its turn, first come first served."""

    def __init__(self, max_workers: int | None = None, thread_name_prefix: str = "") -> None:
        workers = max_workers if max_workers is not None else min(32, (os.cpu_count() or 1) + 4)
        super().__init__(workers, thread_name_prefix or "turnkit-worker")
        self._guard = threading.Lock()
        self._waiting: list[SimpleQueue[_Work | None]] = []  # idle threads, the last idle last
        self._queued: deque[_Work] = deque()
        self._started: list[threading.Thread] = []
        self._closing = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        work: _Work = (future, fn, args, kwargs)
        with self._guard:
            if self._closing:
                raise RuntimeError("cannot schedule new futures after shutdown")
            if self._waiting:
                self._waiting.pop().put(work)
            elif len(self._started) < self._max_workers:
                thread = threading.Thread(
                    target=self._serve,
                    args=(work,),
                    name=f"{self._thread_name_prefix}_{len(self._started)}",
                    daemon=True,
                )
                self._started.append(thread)
                thread.start()
            else:
                self._queued.append(work)
        return future

    def _serve(self, work: _Work | None) -> None:
        inbox: SimpleQueue[_Work | None] = SimpleQueue()
        while work is not None:
            settle = _run(work)
            with self._guard:  # idle again before the caller hears back: its next call is ours
                if self._queued:
                    work = self._queued.popleft()
                elif self._closing:
                    work = None
                else:
                    self._waiting.append(inbox)
                    work = _FROM_INBOX
            settle()
            if work is _FROM_INBOX:
                work = inbox.get()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """No new work; the idle threads end, the busy ones once the queued work is done (or
        cancelled, with ``cancel_futures``); with ``wait``, return when all have ended."""
        with self._guard:
            self._closing = True
            if cancel_futures:
                while self._queued:
                    self._queued.popleft()[0].cancel()
            for inbox in self._waiting:
                inbox.put(None)
            self._waiting.clear()
            started = list(self._started)
        if wait:
            current = threading.current_thread()
            for thread in started:
                if thread is not current:
                    thread.join()


def _run(work: _Work) -> Callable[[], None]:
    """Run ``work``; what settles its future with the outcome (nothing, when it was cancelled)."""
    future, fn, args, kwargs = work
    if not future.set_running_or_notify_cancel():
        return _nothing
    try:
        result = fn(*args, **kwargs)
    except BaseException as exc:
        return functools.partial(future.set_exception, exc)
    return functools.partial(future.set_result, result)


def _nothing() -> None:
    """A cancelled future's settling: it was settled when it was cancelled."""


def use_warm_threads(max_workers: int | None = None) -> WarmThreads:
    """Make a ``WarmThreads`` the running loop's default pool (``loop.run_in_executor(None,
    ...)``, ``asyncio.to_thread``); the loop shuts it down when it closes."""
    pool = WarmThreads(max_workers)
    asyncio.get_running_loop().set_default_executor(pool)
    return pool
