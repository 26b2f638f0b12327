"""The two drivers of the pipeline's effects (``effects.py``): ``drive`` and ``adrive``.

``drive`` performs the effects in the calling thread; ``adrive`` performs them without ever
blocking the event loop: it advances the steps in a worker thread, performing the effects that may
block there (ledger calls, the application's code, a sync permission provider, a sync handler
under its timeout), and comes back to the loop only for what belongs there (an async handler or
provider, a pause). A call whose code is all sync so makes one thread hop, not one per effect.
On a ledger that does not block (``MemoryLedger``) the steps stay on the loop and a sync handler
is the one hop: handed to the handler pool from the loop, its outcome recorded by a thread of its
own if the awaiting run is cancelled meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import logging
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from turnkit.executor.effects import (
    Cancelled,
    Effect,
    Environment,
    HandlerOutcome,
    NeverRan,
    OnLedger,
    Pause,
    Permissions,
    RunHandler,
    Steps,
    UserCode,
    bubbles,
)
from turnkit.executor.inline import TakenOver, Watch, may_inline, run_inline
from turnkit.observe.spans import active
from turnkit.registry.caller import (
    Caller,
    PermissionProvider,
    StaticPermissions,
    apermissions_now,
    permission_set,
    permissions_now,
)

__all__ = ["adrive", "drive"]

T = TypeVar("T")
log = logging.getLogger("turnkit.executor")


def drive(steps: Steps[T], env: Environment, reply: Any = None) -> T:
    """Run ``steps`` to its answer, performing each effect in this thread (``reply``: what the
    effect they wait on gave, when they were started elsewhere).

    An effect that fails is raised inside the steps, so they can clean up before it propagates.
    An interrupt (Ctrl-C's ``KeyboardInterrupt``, ``SystemExit``) while an effect runs throws
    ``Cancelled`` into the steps, whose clean-up runs (a claimed confirmation is reopened, a key
    released; a write whose handler was handed over keeps its key, since it may run: a repeat
    waits, then gets ``outcome_unknown``), then goes on up.
    """
    error: Exception | None = None
    while True:
        try:
            effect = steps.send(reply) if error is None else steps.throw(error)
        except StopIteration as stop:
            return stop.value
        try:
            reply, error = _perform(effect, env), None
        except Exception as exc:  # handed back to the steps on the next turn
            reply, error = None, exc
        except BaseException as interrupt:
            _unwind(steps, env, interrupt)
            raise


def _unwind(steps: Steps[Any], env: Environment, interrupt: BaseException) -> None:
    """Throw ``Cancelled`` into ``steps`` and perform their clean-up effects until they stop."""
    reply: Any = None
    error: Exception | None = (
        interrupt  # a handler that never ran (``NeverRan``) says so to the steps
        if isinstance(interrupt, Cancelled)
        else Cancelled(f"the call was interrupted ({type(interrupt).__name__})")
    )
    while True:
        try:
            effect = steps.send(reply) if error is None else steps.throw(error)
        except (StopIteration, Exception):  # cleaned up: Cancelled (or what it became) came out
            return
        try:
            reply, error = _perform(effect, env), None
        except Exception as exc:
            reply, error = None, exc


async def adrive(steps: Steps[T], env: Environment) -> T:
    """Run ``steps`` to its answer without blocking the event loop (see the module's doc).

    The steps run on the loop up to their first effect that may block (a ledger call, the
    application's code, a sync permission provider); from there a worker thread performs it and
    runs them on, up to an effect that belongs on the loop (a handler, a pause, an async
    provider) or their answer. Steps that need nothing that blocks never leave the loop.
    """
    cancelled: threading.Event | None = None  # made when a worker thread first needs it
    reply: Any = None
    error: Exception | None = None
    while True:
        try:
            effect: Any = steps.send(reply) if error is None else steps.throw(error)
        except StopIteration as stop:
            return stop.value
        if _blocks(effect, env):
            cancelled = cancelled or threading.Event()
            try:
                done, found = await _in_worker(steps, env, effect, cancelled)
            except asyncio.CancelledError:
                cancelled.set()  # the worker thread stops the steps at their next effect
                raise
            if done:
                return found
            effect = found
        try:
            if isinstance(effect, RunHandler) and not _is_async(effect.handler):
                reply, error = await _run_in_pool(steps, effect, env), None
            else:
                reply, error = await _aperform(effect, env), None
        except Exception as exc:  # handed back to the steps on the next turn
            reply, error = None, exc


def _in_worker(
    steps: Steps[T], env: Environment, effect: Effect, cancelled: threading.Event
) -> asyncio.Future[tuple[bool, Any]]:
    """``_advance`` in a worker thread of the loop's default pool (with this context, as
    ``asyncio.to_thread``): a future settled with what it returns, or with the ``timeout``
    answer the watchdog's thread gave the steps when their handler, run in that worker thread
    (``inline.py``), overran."""
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[tuple[bool, Any]] = loop.create_future()

    def settle(result: Any = None, failure: BaseException | None = None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(_settle_with, waiter, result, failure)

    def take_over() -> None:  # the watchdog's thread: the steps are its now
        try:
            settle(_advance(steps, env, None, cancelled, None, HandlerOutcome("timeout")))
        except BaseException as failure:  # the awaiting run raises it, as any call's failure
            settle(failure=failure)

    def work() -> None:
        try:
            found = _advance(steps, env, effect, cancelled, Watch(take_over))
        except BaseException as failure:
            settle(failure=failure)
            return
        if found is not _ABANDONED:
            settle(found)

    loop.run_in_executor(None, contextvars.copy_context().run, work)
    return waiter


def _settle_with(waiter: asyncio.Future[Any], result: Any, failure: BaseException | None) -> None:
    """On the loop: settle ``waiter`` (unless its run was cancelled meanwhile)."""
    if waiter.done():
        return
    if failure is not None:
        waiter.set_exception(failure)
    else:
        waiter.set_result(result)


_ABANDONED: Any = object()
"""What ``_advance`` returns when the watchdog took its steps over: nobody reads it."""


def _blocks(effect: Effect, env: Environment) -> bool:
    """True for an effect that may block: performed in a worker thread, never on the loop.

    A sync handler is one when the ledger blocks: the worker thread that performs the ledger
    work before it hands it to the handler pool and waits under its timeout, as ``drive`` does,
    so the call makes one hop from the loop, not three (measured: a hop costs ~0.13 ms of CPU
    here, more than a plain read's ledger work). On a ledger that does not block the steps never
    leave the loop, and the handler pool is the one hop (``_run_in_pool``).
    """
    if isinstance(effect, OnLedger):
        return env.ledger.blocking
    if isinstance(effect, UserCode):
        return True
    if isinstance(effect, RunHandler):
        return env.ledger.blocking and not _is_async(effect.handler)
    if isinstance(effect, Permissions):
        return not (_is_async(env.permissions) or isinstance(env.permissions, StaticPermissions))
    return False


@dataclass(frozen=True, slots=True)
class _Awaitable:
    """What a sync permission provider returned that must be awaited on the loop."""

    value: Any


def _advance(
    steps: Steps[T],
    env: Environment,
    effect: Effect | None,
    cancelled: threading.Event,
    watch: Watch | None = None,
    given: Any = None,
) -> tuple[bool, Any]:
    """In a worker thread: perform ``effect``, then run ``steps`` on, performing the effects that
    may block here, up to its answer ``(True, answer)`` or to an effect for the event loop
    ``(False, effect)``. A sync handler runs here too, watched for its timeout (``watch``,
    ``inline.py``), unless a handler that overran still holds a thread; with ``effect`` None the
    steps are taken over from such a handler: ``given`` (its ``timeout``) goes in first.

    Once ``cancelled`` is set, ``Cancelled`` is thrown into the steps at their next effect
    (``NeverRan`` when it is their handler, never handed over); the effects of their clean-up
    still run. Once a handler has run, its outcome is recorded (audit,
    idempotency, confirmation) whatever happens to the awaiting run: the write is done, and a
    released key would let a retry do it again.
    """
    stopping = effect is None  # taken over: the handler ran, past its time
    reply: Any = given
    error: Exception | None = None
    while True:
        if effect is None:
            pass  # a take-over's first turn: ``given`` is the handler's outcome
        elif cancelled.is_set() and not stopping:
            stopping = True
            reply, error = None, _stopped_before(effect)
        else:
            try:
                if isinstance(effect, Permissions):
                    answer = _permissions_in_thread(env.permissions, effect.caller)
                    if isinstance(answer, _Awaitable):
                        return False, answer
                    reply, error = answer, None
                elif isinstance(effect, RunHandler) and watch is not None and _inlines(env):
                    reply, error = run_inline(effect, watch, _to_completion), None
                else:
                    reply, error = _perform(effect, env), None
            except TakenOver:  # the watchdog's thread has the steps now
                return True, _ABANDONED
            except Exception as exc:  # handed back to the steps on the next turn
                reply, error = None, exc
            except BaseException as interrupt:  # as ``drive``: the steps clean up, it goes on
                _unwind(steps, env, interrupt)
                raise
            stopping = stopping or isinstance(effect, RunHandler)
        try:
            effect = steps.send(reply) if error is None else steps.throw(error)
        except StopIteration as stop:
            return True, stop.value
        # once here, ledger work stays here too (any ledger): a run cancelled meanwhile still
        # gets its handler's outcome recorded, its clean-up done, by this thread; and an effect
        # for the loop of a run cancelled meanwhile (nobody would perform it) is not handed back:
        # the next turn tells the steps instead, and they clean up here; and a sync provider's
        # permissions (``StaticPermissions`` too, asked on the loop when the steps start there)
        # are asked here: handing them to the loop and back would cost two thread switches
        on_loop = not (
            _blocks(effect, env)
            or isinstance(effect, OnLedger)
            or (isinstance(effect, Permissions) and not _is_async(env.permissions))
        )
        if on_loop and (stopping or not cancelled.is_set()):
            return False, effect


def _inlines(env: Environment) -> bool:
    """Whether a sync handler runs in its call's worker thread: unless the executor says not
    (``inline_handlers=False``), a handler that overran still holds one, or the executor was
    closed (the pool then refuses it: ``NeverRan``)."""
    return (
        env.inline_handlers and may_inline() and not getattr(env.handler_pool, "_shutdown", False)
    )


def _stopped_before(effect: Effect | None) -> Cancelled:
    """What the steps of a cancelled run are told instead of ``effect`` being performed: a
    handler never handed over never ran (its key is released, its approval reopened)."""
    if isinstance(effect, RunHandler):
        return NeverRan("the run awaiting this call was cancelled before its handler ran")
    return Cancelled("the run awaiting this call was cancelled")


def _permissions_in_thread(provider: PermissionProvider, caller: Caller) -> Any:
    if caller.user_id is None:
        return frozenset()
    answer = provider(caller)
    if inspect.isawaitable(answer):
        return _Awaitable(answer)
    return permission_set(answer)


def _perform(effect: Effect, env: Environment) -> Any:
    if isinstance(effect, OnLedger):
        return effect.run(env.ledger)
    if isinstance(effect, Permissions):
        return permissions_now(env.permissions, effect.caller)
    if isinstance(effect, RunHandler):
        return _run_sync(effect, env.handler_pool)
    if isinstance(effect, UserCode):
        return effect.function(*effect.args)
    time.sleep(effect.seconds)
    return None


async def _aperform(effect: Effect | _Awaitable, env: Environment) -> Any:
    """An effect for the loop: a handler, a pause, an async (or in-memory) provider's answer."""
    if isinstance(effect, _Awaitable):
        return permission_set(await effect.value)
    if isinstance(effect, Permissions):
        return await apermissions_now(env.permissions, effect.caller)
    if isinstance(effect, RunHandler):
        return await _run_async(effect)
    if isinstance(effect, Pause):
        await asyncio.sleep(effect.seconds)
        return None
    if isinstance(effect, OnLedger):  # a ledger that does not block (``MemoryLedger``)
        return effect.run(env.ledger)
    raise TypeError(f"{type(effect).__name__} is performed in the worker thread, not on the loop")


def _is_async(handler: Callable[..., Any]) -> bool:
    """An ``async def`` function, or an object whose ``__call__`` is one (asked once per
    handler: a tool's handler never changes)."""
    try:
        return _ASYNC[handler]
    except (KeyError, TypeError):  # not asked yet, or not hashable (asked every time)
        pass
    call = getattr(handler, "__call__", None)  # noqa: B004  (an async __call__ method)
    found = inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(call)
    with contextlib.suppress(TypeError):  # no weak reference to it: asked again next time
        _ASYNC[handler] = found
    return found


_ASYNC: weakref.WeakKeyDictionary[Callable[..., Any], bool] = weakref.WeakKeyDictionary()


def _to_completion(
    handler: Callable[..., Any], input: dict[str, Any], ctx: Any, span: Any = None
) -> Any:
    """Call ``handler`` in this (worker) thread, its call's ``span`` current, and finish
    whatever it returns, awaitables too."""
    with active(span):
        value = handler(input, ctx)
        if inspect.isawaitable(value):

            async def finish() -> Any:
                return await value

            value = asyncio.run(finish())
    return value


def _run_sync(effect: RunHandler, pool: ThreadPoolExecutor) -> HandlerOutcome:
    future = _hand_over(effect, pool)
    with contextlib.suppress(Exception):  # the wait's timeout, or the pool dropping it: below
        future.exception(timeout=effect.timeout)
    return _finished(future) if future.done() else HandlerOutcome("timeout")


def _finished(done: Future[Any]) -> HandlerOutcome:
    """How a handler that is no longer running ended, the same from either path: its value, or
    its failure as an answer; ``NeverRan`` when the pool dropped it unrun; LangGraph's interrupts
    and a ``BaseException`` (``SystemExit``) raised on up."""
    if done.cancelled():
        raise _never_ran()
    failure = done.exception()
    if failure is None:
        return HandlerOutcome("ok", done.result())
    if bubbles(failure) or not isinstance(failure, Exception):
        raise failure
    return HandlerOutcome("error", failure)


def _hand_over(effect: RunHandler, pool: ThreadPoolExecutor) -> Future[Any]:
    """``effect``'s handler submitted to the handler pool; a pool the closing executor shut down
    refuses it, and it never runs (``NeverRan``)."""
    try:
        return pool.submit(_to_completion, effect.handler, effect.input, effect.ctx, effect.span)
    except RuntimeError as refused:  # "cannot schedule new futures after shutdown"
        raise _never_ran() from refused


def _never_ran() -> NeverRan:
    """For steps whose handler the pool dropped unrun (the executor was closed meanwhile): they
    clean up as cancelled (a key released), not record a failure of code that never ran."""
    return NeverRan("the executor was closed before the handler ran; it did not run")


async def _run_async(effect: RunHandler) -> HandlerOutcome:
    """An async handler awaited under its timeout, in a task of its own (so the context changes
    it makes stay its own, on every Python)."""
    with active(effect.span):  # the task copies the context: the handler's spans nest
        task = asyncio.ensure_future(_guarded(effect.handler(effect.input, effect.ctx)))
    try:
        return await asyncio.wait_for(task, effect.timeout)
    except TimeoutError:  # only wait_for's: _guarded turns the handler's own into an error
        return HandlerOutcome("timeout")


async def _run_in_pool(steps: Steps[Any], effect: RunHandler, env: Environment) -> HandlerOutcome:
    """A sync handler run from the loop in the handler pool, under its timeout. A handler is
    never stopped, nor kept from starting, by what happens to its awaiting run (as on the sync
    path: a handler still queued at its timeout runs later, which its answer warns of):
    cancelled meanwhile, the run goes, and a thread of its own waits for the handler's outcome
    and runs ``steps`` on to record it (audit, idempotency), as ``_advance`` does for a call in
    a worker thread.

    The run awaits one plain future, settled by the pool's thread (the handler done) or by a
    timer (its time up): no wrapped, shielded or timed future, whose callbacks and closures
    were ~20 more objects alive per call across the handler's await, each a cost to the
    collector when hundreds of turns wait at once."""
    loop = asyncio.get_running_loop()
    deadline = time.monotonic() + effect.timeout
    future = _hand_over(effect, env.handler_pool)
    waiter: asyncio.Future[Any] = loop.create_future()
    future.add_done_callback(_HandBack(loop, waiter))
    timer = loop.call_later(effect.timeout, _settle, waiter, None)
    try:
        done = await waiter  # the handler's finished future, or None when its time was up
    except asyncio.CancelledError:
        env.orphans.add(future)
        threading.Thread(
            target=_record_after,
            args=(steps, env, future, deadline, _call_of(effect)),
            name="turnkit-record",
            daemon=False,  # the outcome is recorded even when the program is ending
        ).start()
        raise
    finally:
        timer.cancel()
    if done is None:
        return HandlerOutcome("timeout")
    try:
        return _finished(done)
    except Exception:  # NeverRan, a LangGraph interrupt: for the steps, as on the sync path
        raise
    except BaseException as interrupt:  # as ``drive``: the steps clean up (a started write
        _unwind(steps, env, interrupt)  # keeps its key), and it goes on up
        raise


class _HandBack:
    """The handler pool's callback: in the pool's thread, the handler finished, so settle the
    awaiting run's ``waiter`` with its future on the loop.

    It lets go of ``waiter`` once called. A ``concurrent.futures.Future`` keeps its callbacks
    after running them, and ``waiter`` holds the future as its result: kept, the callback would
    close a cycle (future, callback, waiter, future) that only the garbage collector frees: ~14
    objects a call, which outlive young collections (measured: 500 concurrent turns left ~7,000
    for the older generations to free, the six-step shape none)."""

    __slots__ = ("loop", "waiter")

    def __init__(self, loop: asyncio.AbstractEventLoop, waiter: asyncio.Future[Any]) -> None:
        self.loop: asyncio.AbstractEventLoop = loop
        self.waiter: asyncio.Future[Any] | None = waiter

    def __call__(self, done: Future[Any]) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            self.loop.call_soon_threadsafe(_settle, waiter, done)


def _settle(waiter: asyncio.Future[Any], value: Any) -> None:
    """On the loop: give ``waiter`` the handler's finished future, or None at its timeout."""
    if not waiter.done():  # the first of the handler and its timeout settles it
        waiter.set_result(value)


def _record_after(
    steps: Steps[Any], env: Environment, future: Any, deadline: float, call: str
) -> None:
    """In its own thread: the outcome of a handler whose run was cancelled, given to ``steps``,
    which record it (their answer goes nowhere: nobody awaits it). A handler that never ran (the
    executor closed with it still queued) is no outcome: the steps clean up as cancelled (its key
    released, nothing audited as run). A handler that ends after its executor was closed is not
    recorded (``Orphans``): the ledger may be closed too."""
    try:
        outcome = HandlerOutcome("ok", future.result(max(0.0, deadline - time.monotonic())))
    except Exception as exc:  # the handler's failure, the wait's timeout, or never run at all
        outcome = HandlerOutcome("error", exc) if future.done() else HandlerOutcome("timeout")
    try:
        if not env.orphans.may_record(future):
            steps.close()
            log.warning(NOT_RECORDED, call)
        elif future.cancelled():
            _unwind(steps, env, _never_ran())
        else:
            drive(steps, env, outcome)
    except Exception:  # nobody to tell but the log
        log.exception("recording the outcome of a cancelled call failed")
    finally:
        env.orphans.recorded(future)


NOT_RECORDED = (
    "the executor was closed while the handler of %s, whose run was cancelled, still ran: its"
    " outcome is not recorded (no audit row; its idempotency key stays running, so a repeat"
    " gets outcome_unknown once the call is stale). Close the executor after its calls end."
)


def _call_of(effect: RunHandler) -> str:
    """How the log names the call of ``effect``."""
    return f"{effect.ctx.tool.name!r} (call {effect.ctx.call_id})"


async def _guarded(work: Any) -> HandlerOutcome:
    try:
        return HandlerOutcome("ok", await work)
    except Exception as exc:  # the handler's failure becomes an answer
        if bubbles(exc):
            raise
        return HandlerOutcome("error", exc)
