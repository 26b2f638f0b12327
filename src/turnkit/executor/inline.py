"""A sync handler run in the worker thread that already runs its call's steps, its timeout kept
by a watchdog: the async path's call makes one thread hop, not two.

Handing a sync handler to the handler pool and waiting for it under its timeout cost a thread
switch each way (~45 µs of a ~450 µs REST invoke, in process, and a fifth of a worker's
requests/s under 50 clients, measured). Run where the steps are, the handler needs someone else
to keep its time: one watchdog thread for the process looks every ``POLL`` seconds at the
handlers running so; one past its timeout is **taken over**: the watchdog gives its steps a
``timeout`` outcome in a thread of its own (they record it and answer, as after the pool's
timeout), and the worker thread, once the handler returns, leaves the steps alone and drops the
outcome (as the pool's late outcome is dropped).

While a handler that was taken over still runs, it holds a worker thread of the event loop's
small default pool; so from then until it returns, calls hand their handlers to the handler pool
again (``may_inline``): a hung handler costs one such thread, never the server.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from turnkit.executor.effects import HandlerOutcome, RunHandler, bubbles

__all__ = ["POLL", "TakenOver", "Watch", "may_inline", "run_inline"]

log = logging.getLogger("turnkit.executor")

POLL = 0.05
"""Seconds between the watchdog's looks: a handler's timeout is kept to within this."""
IDLE = 2.0
"""Seconds the watchdog waits with nothing to watch before its thread ends (started again by
the next handler)."""


class TakenOver(Exception):
    """The handler ran past its timeout and the watchdog gave its steps the ``timeout``: the
    worker thread must not touch them again."""


class Watch:
    """One call whose sync handler runs in its worker thread: its deadline, and what the watchdog
    does when the handler runs past it (``take_over``: given the steps' ``timeout`` outcome, in
    a thread of its own)."""

    __slots__ = ("deadline", "take_over", "taken")

    def __init__(self, take_over: Callable[[], None]) -> None:
        self.take_over = take_over
        self.deadline = 0.0
        self.taken = False


class _Watchdog:
    """The process's one watchdog thread and the handlers it watches."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.watching: set[Watch] = set()
        self.lost = 0  # handlers taken over that still run
        self.thread: threading.Thread | None = None

    def start(self, watch: Watch, timeout: float) -> None:
        with self.lock:
            watch.deadline = time.monotonic() + timeout
            self.watching.add(watch)
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name="turnkit-watchdog",
                                               daemon=True)  # fmt: skip
                self.thread.start()

    def finish(self, watch: Watch) -> bool:
        """The handler returned: whether its steps were taken over meanwhile."""
        with self.lock:
            self.watching.discard(watch)
            if watch.taken:
                self.lost -= 1
            return watch.taken

    def _run(self) -> None:
        idle = 0.0
        while True:
            time.sleep(POLL)
            now = time.monotonic()
            with self.lock:
                due = [watch for watch in self.watching if watch.deadline <= now]
                for watch in due:
                    self.watching.discard(watch)
                    watch.taken = True
                self.lost += len(due)
                idle = 0.0 if self.watching or due else idle + POLL
                if idle >= IDLE:
                    self.thread = None
                    return
            for watch in due:
                threading.Thread(target=_take_over, args=(watch,), name="turnkit-timeout",
                                 daemon=False).start()  # fmt: skip


def _take_over(watch: Watch) -> None:
    try:
        watch.take_over()
    except Exception:  # nobody to tell but the log
        log.exception("recording the timeout of a handler failed")


_WATCHDOG = _Watchdog()


def may_inline() -> bool:
    """Whether a sync handler may run in its call's worker thread now: not while a handler
    that ran past its timeout still holds one."""
    return _WATCHDOG.lost == 0


def run_inline(effect: RunHandler, watch: Watch, run: Callable[..., Any]) -> HandlerOutcome:
    """``run(handler, input, ctx, span)`` in this thread, watched for ``effect.timeout``: its
    outcome; ``TakenOver`` when the watchdog answered ``timeout`` for it meanwhile (the outcome
    is then dropped). LangGraph's interrupts and a ``BaseException`` go on up, as from the pool.
    """
    _WATCHDOG.start(watch, effect.timeout)
    try:
        value = run(effect.handler, effect.input, effect.ctx, effect.span)
    except BaseException as exc:
        if _WATCHDOG.finish(watch):  # the steps are the watchdog's: whatever this was, dropped
            raise TakenOver from None
        if isinstance(exc, Exception) and not bubbles(exc):
            return HandlerOutcome("error", exc)
        raise
    if _WATCHDOG.finish(watch):
        raise TakenOver
    return HandlerOutcome("ok", value)
