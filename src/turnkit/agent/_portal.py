"""A private event loop in a daemon thread: sync callers run coroutines there with a timeout.

Every ``Agent`` runs every turn on the process's one portal (``shared_portal()``, looked up on
every call), from ``prompt`` and ``aprompt`` alike. That gives sync code real cancellation on
timeout (the run is cancelled, not abandoned in a thread), and keeps loop-bound resources on one
loop that outlives every agent (pooled keep-alive connections belong to the loop that opened
them: agents each on a loop of their own failed from the second one on, "Event loop is closed").

What a run promises its caller:

- **Interrupted, it is cancelled and over.** When the waiting thread is interrupted (Ctrl-C) or
  the awaiting task is cancelled, the run is cancelled and waited for (up to
  ``CANCEL_WAIT`` seconds) before the interruption goes on, so the caller's lock on the
  conversation is not released while its turn still runs.
- **A forked child gets its own portal.** The portal's thread does not survive ``os.fork``;
  ``shared_portal()`` starts a new one in the child, and a portal refuses to be used from a
  process it was not made in.
- **A blocking call from the portal's own loop is refused**, not deadlocked: an async tool
  handler runs on that loop, and waiting there for a turn on the same loop would wait forever.

Why not anyio's blocking portal (``anyio.from_thread.start_blocking_portal``), the kept library to
reach for first: checked with anyio 4 here, ``BlockingPortal.call`` waits on ``future.result()``
and lets an interruption of the waiting thread leave the task running; cancelling the future it
returns marks it done at once, before the task has ended (and anyio's level cancellation cancels
the task's clean-up awaits too, which ``asyncio.wait_for`` in our timeouts lets finish); a portal
made before ``os.fork`` is silently dead in the child. Those three are what this module is for;
wrapping anyio would need all of this code and add a task group and a cancel scope per call.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextvars
import os
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from turnkit.errors import AgentBusy

T = TypeVar("T")

CANCEL_WAIT = 5.0
"""How long an interrupted caller waits for its cancelled run to end before it goes on."""

ON_OWN_LOOP = (
    "a blocking Agent call (prompt, stream, confirm, get_messages, close, or"
    " Agent(storage=...)) was made from async code on turnkit's own event loop, such as an async"
    " tool handler: it would wait for itself. In async code use the async twins: `await"
    " agent.aprompt(...)`, `agent.astream(...)`, `await agent.aconfirm(...)`, `await"
    " agent.aclose()` (or make the tool a plain function)"
)


class Portal:
    """An event loop running in its own daemon thread until ``close()``."""

    def __init__(self, name: str = "turnkit-portal") -> None:
        self._closed = False
        self.pid = os.getpid()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the portal and wait for its result (from sync code).

        Raises:
            AgentBusy: called from the portal's own loop (``coroutine`` is closed unrun).
        """
        if threading.current_thread() is self._thread:
            coroutine.close()
            raise AgentBusy(ON_OWN_LOOP)
        self._check_usable(coroutine)
        outcome, cancel = self._start(coroutine)
        try:
            return outcome.result()
        except BaseException:  # KeyboardInterrupt, SystemExit: the run must not go on alone
            if not outcome.done():
                cancel()
                concurrent.futures.wait([outcome], timeout=CANCEL_WAIT)
            raise

    async def arun(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the portal and await its result (from another event loop)."""
        if threading.current_thread() is self._thread:
            return await coroutine
        self._check_usable(coroutine)
        outcome, cancel = self._start(coroutine)
        waiting = asyncio.wrap_future(outcome)
        try:
            return await asyncio.shield(waiting)
        except asyncio.CancelledError:
            if not waiting.done():
                cancel()
                await asyncio.wait([waiting], timeout=CANCEL_WAIT)
            raise

    def submit(
        self, coroutine: Coroutine[Any, Any, T], *, blocking: bool
    ) -> tuple[concurrent.futures.Future[T], Callable[[], None]]:
        """Start ``coroutine`` on the portal without waiting: its outcome (settled once the task
        is over) and a function that cancels it from any thread. For callers that consume what
        the run produces while it runs (``Agent.stream``); they must cancel it if they stop.

        Raises:
            AgentBusy: ``blocking`` (the caller will wait in this thread) on the portal's own
                loop, where it would wait for itself (``coroutine`` is closed unrun).
        """
        if blocking and threading.current_thread() is self._thread:
            coroutine.close()
            raise AgentBusy(ON_OWN_LOOP)
        self._check_usable(coroutine)
        return self._start(coroutine)

    @property
    def closed(self) -> bool:
        """True once ``close()`` was called."""
        return self._closed

    def _check_usable(self, coroutine: Coroutine[Any, Any, Any]) -> None:
        if self._closed or self.pid != os.getpid():
            coroutine.close()
            where = "closed" if self._closed else f"made in process {self.pid}, before a fork"
            raise RuntimeError(f"this portal is {where}: use shared_portal()")

    def _start(
        self, coroutine: Coroutine[Any, Any, T]
    ) -> tuple[concurrent.futures.Future[T], Callable[[], None]]:
        """Start ``coroutine`` as a task on the loop: its outcome, settled only once the task is
        over (cancelled too), and a function that cancels it from any thread."""
        outcome: concurrent.futures.Future[T] = concurrent.futures.Future()
        tasks: list[asyncio.Task[T]] = []

        def settle(task: asyncio.Task[T]) -> None:
            if task.cancelled():
                outcome.cancel()
                outcome.set_running_or_notify_cancel()  # wakes concurrent.futures.wait()
                return
            if not outcome.set_running_or_notify_cancel():  # cancelled meanwhile: none waits
                return
            error = task.exception()
            if error is not None:
                outcome.set_exception(error)
            else:
                outcome.set_result(task.result())

        here = contextvars.copy_context()  # the caller's: its current span is the run's parent

        def start() -> None:
            task = self._loop.create_task(coroutine, context=here)
            task.add_done_callback(settle)
            tasks.append(task)

        def cancel() -> None:  # queued after start(): the task exists when this runs
            self._loop.call_soon_threadsafe(lambda: tasks[0].cancel())

        self._loop.call_soon_threadsafe(start)
        return outcome, cancel

    def close(self) -> None:
        """Stop the loop and its thread."""
        if self._closed:
            return
        self._closed = True
        if self.pid != os.getpid():  # a fork's copy: the thread lives in the parent only
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()


_shared: Portal | None = None
_shared_lock = threading.Lock()


def _after_fork_in_child() -> None:
    """A fork copies the lock as it was: held, if another thread was in ``shared_portal()``."""
    global _shared_lock
    _shared_lock = threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)


def shared_portal() -> Portal:
    """The process's portal, started on first use (and again in a forked child process)."""
    global _shared
    with _shared_lock:
        if _shared is None or _shared.closed or _shared.pid != os.getpid():
            _shared = Portal()
            atexit.register(_shared.close)
        return _shared
