"""Effects: what the pipeline's steps ask of the outside world, and the environment they are
performed against.

The execute and confirm pipelines are generators that ``yield`` an effect whenever they need the
outside world — the ledger, the permission provider, a handler, a pause — and receive its result;
``drivers.py`` performs them, sync or async, so the steps are written once.
A ledger effect names the ``Ledger`` method and carries its arguments:
``yield on_ledger(Ledger.charge, identity, window, cost, limit)``. The type checker checks the
arguments against the method's signature and go-to-definition follows it; the driver calls the
method of that name on the executor's ledger, so a subclass's override (``MemoryLedger``) runs.
The effect holds its arguments as data, not a closure: a lambda would make every local it reads a
closure cell of the pipeline's generator, alive across the handler's await (under 500
concurrent turns, ~14,000 more objects for the garbage collector to walk).
"""

from __future__ import annotations

import inspect
import json
import threading
from collections.abc import Callable, Generator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Concatenate, Literal, ParamSpec, TypeAlias, TypeVar

from turnkit.ledger import Ledger
from turnkit.registry._memo import remember
from turnkit.registry.caller import Caller, PermissionProvider
from turnkit.registry.registry import Registry
from turnkit.registry.settings import Settings

T = TypeVar("T")
P = ParamSpec("P")


@dataclass(frozen=True, slots=True)
class Permissions:
    """Ask the provider for ``caller``'s permissions now."""

    caller: Caller


@dataclass(frozen=True, slots=True)
class OnLedger:
    """Call the ledger's method ``method`` with ``args`` and ``kwargs`` (in a worker thread on
    the async path); built by ``on_ledger``."""

    method: str
    """The ``Ledger`` method's name, taken from the method itself by ``on_ledger``."""
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] | None = None
    """None when there are none (most effects: no dict made per call)."""

    def run(self, ledger: Ledger) -> Any:
        """Perform the call on ``ledger`` (its class's method: ``MemoryLedger``'s overrides run)."""
        method = getattr(ledger, self.method)
        return method(*self.args, **self.kwargs) if self.kwargs else method(*self.args)


def on_ledger(
    method: Callable[Concatenate[Ledger, P], Any], /, *args: P.args, **kwargs: P.kwargs
) -> OnLedger:
    """The effect of calling ``method`` — a ``Ledger`` method, e.g. ``Ledger.charge`` — on the
    executor's ledger with these arguments (checked against its signature)."""
    if method not in _LEDGER_METHODS:
        _check(method)
    return OnLedger(method.__name__, args, kwargs or None)


_LEDGER_METHODS: set[Callable[..., Any]] = set()
"""The methods ``on_ledger`` was given and found to be sync ``Ledger`` methods (checked once)."""


def _check(method: Callable[..., Any]) -> None:
    """Refuse what the driver could not call by its name on a ledger: a function that is not the
    ``Ledger`` method of its name, or an async twin (its coroutine would never be awaited)."""
    if getattr(Ledger, method.__name__, None) is not method:
        raise TypeError(f"on_ledger takes a Ledger method (Ledger.charge, ...), not {method!r}")
    if inspect.iscoroutinefunction(method):
        raise TypeError(f"on_ledger takes a sync Ledger method; {method.__name__} is async")
    _LEDGER_METHODS.add(method)


@dataclass(frozen=True, slots=True)
class RunHandler:
    """Run a tool's handler with a timeout; the result is a ``HandlerOutcome``."""

    handler: Callable[..., Any]
    input: dict[str, Any]
    ctx: Any
    timeout: float
    span: Any = None
    """The call's span, made current where the handler runs (its own spans nest under it)."""


@dataclass(frozen=True, slots=True)
class Pause:
    """Wait ``seconds`` (while polling for another process's outcome)."""

    seconds: float


@dataclass(frozen=True, slots=True)
class UserCode:
    """Call the application's code (a module's ``enabled()``, a danger check, a cost function):
    it may block, so async runs call it in a worker thread."""

    function: Callable[..., Any]
    args: tuple[Any, ...] = ()


Effect: TypeAlias = Permissions | OnLedger | RunHandler | Pause | UserCode
Steps: TypeAlias = Generator[Effect, Any, T]


@dataclass(frozen=True, slots=True)
class HandlerOutcome:
    """How a handler ended: ``ok`` with its value, ``error`` with the exception, or ``timeout``."""

    kind: Literal["ok", "error", "timeout"]
    value: Any = None


def bubbles(exc: BaseException) -> bool:
    """LangGraph's interrupts (``GraphBubbleUp``) must pass through, never become an answer."""
    return any(cls.__name__ == "GraphBubbleUp" for cls in type(exc).__mro__)


@dataclass(frozen=True, slots=True)
class Environment:
    """What the steps consult and the drivers perform effects against: the executor's parts."""

    registry: Registry
    """The tools."""
    defaults: Settings
    """The settings given in code; the ledger's overrides are read at call time."""
    clock: Callable[[], float]
    """Seconds since the epoch (a test's fake clock expires confirmations)."""
    ledger: Ledger
    """The durable memory: confirmations, idempotency, usage, settings, audit."""
    permissions: PermissionProvider
    """The application's ``(caller) -> permissions``, asked at call time."""
    handler_pool: ThreadPoolExecutor
    """The threads sync handlers run in (apart from ledger work)."""
    orphans: Orphans
    """The outcomes of cancelled runs' handlers still to be recorded (``_record_after``)."""
    inline_handlers: bool = True
    """Whether a sync handler of an async call on a blocking ledger runs in the call's worker
    thread (``inline.py``) rather than in ``handler_pool``."""
    _merged: dict[object, Settings] = field(default_factory=dict)

    def settings(self, overrides: Mapping[str, Any]) -> Settings:
        """The defaults with the operator's ``overrides``, merged once per distinct overrides
        (they change rarely; merging checks every value: ~20 µs a call, measured)."""
        if not overrides:
            return self.defaults
        key: object
        try:
            key = frozenset((k, type(v), v) for k, v in overrides.items())  # 1 is not True
            found = self._merged.get(key)
        except TypeError:  # a list among the values: not hashable
            key = json.dumps(overrides, sort_keys=True, default=repr)
            found = self._merged.get(key)
        if found is None:
            found = remember(self._merged, key, self.defaults.merged(overrides), limit=64)
        return found


class Orphans:
    """The calls whose awaiting run was cancelled while their sync handler was in the pool: a
    thread of their own waits for the handler and records its outcome (``_record_after``).

    Closing the executor must leave no such thread working on a ledger that its owner closes
    next: ``close`` waits for those whose handler has ended (they record their outcome), and
    tells the others, whose handler still runs, to record nothing.
    """

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._live: dict[Future[Any], bool] = {}
        """Each handler's future -> whether its outcome is recorded after ``close``."""
        self._closed = False

    def add(self, future: Future[Any]) -> None:
        """A cancelled run left ``future``'s handler to a thread that records its outcome."""
        with self._changed:
            self._live[future] = False

    def may_record(self, future: Future[Any]) -> bool:
        """Whether the outcome of ``future``'s handler, ended now, may still be recorded."""
        with self._changed:
            return not self._closed or self._live.get(future, False)

    def recorded(self, future: Future[Any]) -> None:
        """The thread of ``future`` is done with the ledger."""
        with self._changed:
            self._live.pop(future, None)
            self._changed.notify_all()

    def close(self, timeout: float) -> bool:
        """Let the outcomes of handlers ended by now be recorded, waiting at most ``timeout``
        seconds; the others will not be. False when some were still being recorded then."""
        with self._changed:
            self._closed = True
            for future in self._live:
                self._live[future] = future.done()
            return self._changed.wait_for(lambda: not any(self._live.values()), timeout)


class Cancelled(Exception):
    """Thrown into the steps when the run awaiting them was cancelled while they ran in a
    worker thread: they clean up (an idempotency key is released) and stop, so a cancelled call
    does no more ledger work (no confirmation, no charge) than it had started."""


class NeverRan(Cancelled):
    """The handler was handed over but never ran (the executor closed with it still queued): its
    steps clean up as for a call that never started (a key released, an approval reopened)."""
