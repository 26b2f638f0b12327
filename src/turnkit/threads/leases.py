"""A run's lease on its thread: taken before the run reads the thread, checked before each write,
renewed while it runs, given back at its end (``turnkit.ledger.leases`` keeps them).

The lease travels in the run's config (``configurable["__turnkit_lease"]``), which LangGraph hands
to every node and to every checkpoint write of the run; ``fence`` is the check both make.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
import weakref
from collections.abc import Mapping
from typing import Any, Protocol

from turnkit.errors import LeaseLost, ThreadBusy
from turnkit.ledger.leases import Lease, LocalLeases, ThreadLeases

__all__ = [
    "LEASE_KEY",
    "DeferredSaves",
    "afence_run",
    "agive_back",
    "asettle_run",
    "atake",
    "defer_saves",
    "deferred_saves",
    "fence",
    "fence_run",
    "give_back",
    "lease_of",
    "own_lease",
    "settle_run",
    "take",
]

LEASE_KEY = "__turnkit_lease"
"""The run config's key for the run's ``Lease`` (``__``: LangGraph keeps it out of metadata)."""


class DeferredSaves(Protocol):
    """A checkpointer that defers a run's saves (``turnkit.threads.fenced.FencedSaver``)."""

    def flush(self, thread_id: str) -> None:
        """Write the saves deferred for the run of ``thread_id``."""

    async def aflush(self, thread_id: str) -> None:
        """Async twin of ``flush``."""


Leases = ThreadLeases | LocalLeases
log = logging.getLogger("turnkit.leases")


def lease_of(config: Mapping[str, Any] | None) -> Lease | None:
    """The lease of the run whose config this is, if it has one."""
    if not config:
        return None
    lease = (config.get("configurable") or {}).get(LEASE_KEY)
    return lease if isinstance(lease, Lease) else None


def own_lease(config: Mapping[str, Any] | None) -> Lease | None:
    """``lease_of`` when the lease is of the config's own thread; None for a run nested in a run
    of another thread, which carries that run's lease (its writes and settings are not its)."""
    lease = lease_of(config)
    thread = ((config or {}).get("configurable") or {}).get("thread_id")
    return lease if lease is not None and lease.thread_id == str(thread) else None


def fence(lease: Lease) -> None:
    """Raise ``LeaseLost`` unless ``lease`` is still its thread's: at no cost while its expiry is
    well ahead (or, on PostgreSQL, its lock's session is open), else by asking the database."""
    if lease.vouched() or lease.recheck():
        return
    raise LeaseLost(
        f"this run lost its lease on thread {lease.thread_id!r} ({lease.name}): it ran past the"
        " lease's expiry without renewing it, or its database session ended, so another run may"
        " have taken the thread. Nothing more of this run was written; run the turn again to go on"
        " from the thread's latest checkpoint.",
        thread_id=lease.thread_id,
        holder=lease.leases.holder(lease.thread_id),
    )


def fence_run(config: Mapping[str, Any] | None) -> None:
    """``fence`` the lease of the run whose config this is (none: nothing to check)."""
    lease = lease_of(config)
    if lease is not None:
        fence(lease)


async def afence_run(config: Mapping[str, Any] | None) -> None:
    """``fence_run`` without blocking the event loop: the database, when asked, in a thread."""
    lease = lease_of(config)
    if lease is not None and not lease.vouched():
        await asyncio.to_thread(fence, lease)


_DEFERRED: weakref.WeakKeyDictionary[Lease, DeferredSaves] = weakref.WeakKeyDictionary()


def defer_saves(lease: Lease, saves: DeferredSaves) -> None:
    """Let ``lease``'s run defer its checkpoints in ``saves`` until it acts: for a run whose
    nodes settle before they act (the turn graph's, with ``sync`` durability)."""
    _DEFERRED[lease] = saves


def deferred_saves(lease: Lease | None) -> DeferredSaves | None:
    """Where ``lease``'s run defers its checkpoints, if it does."""
    return None if lease is None else _DEFERRED.get(lease)


def settle_run(config: Mapping[str, Any] | None) -> None:
    """Before a run acts on the world (a round of tool calls, a person's decisions): ``fence_run``,
    and write the saves its checkpointer deferred (``defer_saves``), so that the state that asked
    for the act is durable before the act, and a crash can only lose steps that are harmless to run
    again."""
    lease = lease_of(config)
    if lease is None:
        return
    fence(lease)
    saves = deferred_saves(lease)
    if saves is not None:
        saves.flush(lease.thread_id)


async def asettle_run(config: Mapping[str, Any] | None) -> None:
    """``settle_run`` without blocking the event loop."""
    lease = lease_of(config)
    if lease is None:
        return
    await afence_run(config)
    saves = deferred_saves(lease)
    if saves is not None:
        await saves.aflush(lease.thread_id)


def _busy(leases: Leases, thread_id: str, wait: float) -> ThreadBusy:
    holder = leases.holder(thread_id)
    who = f" ({holder})" if holder else ""
    waited = f" for {wait:g} s" if wait > 0 else ""
    return ThreadBusy(
        f"thread {thread_id!r} is busy: another run{who} is writing it, and it stayed busy"
        f"{waited}. Wait for that run to end, or give this run a busy_timeout (seconds) to wait"
        ' for it: configurable={"thread_id": ..., "busy_timeout": 30}.',
        thread_id=thread_id,
        holder=holder,
    )


def take(leases: Leases, thread_id: str, wait: float) -> Lease:
    """The thread's lease, waiting up to ``wait`` seconds for another run to give it back.

    Raises:
        ThreadBusy: another run still had it when ``wait`` ran out (at once when 0).
    """
    deadline = time.monotonic() + wait
    delay = 0.01
    while (lease := leases.take(thread_id)) is None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise _busy(leases, thread_id, wait)
        time.sleep(min(delay, left))
        delay = min(delay * 2, 0.25)
    _RENEWER.add(lease)
    return lease


async def atake(leases: Leases, thread_id: str, wait: float) -> Lease:
    """``take`` without blocking the event loop (a database is asked in a worker thread).

    Cancelled while it asks (a run's timeout, a client gone), it gives back the lease the
    question may still win: a worker thread cannot be stopped, and its answer would be lost."""

    async def attempt() -> Lease | None:
        if not leases.blocking:
            return leases.take(thread_id)
        asking = _Asking(leases, thread_id)
        try:
            return await asyncio.to_thread(asking)
        except asyncio.CancelledError:
            asking.abandon()
            raise

    deadline = time.monotonic() + wait
    delay = 0.01
    while (lease := await attempt()) is None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise await asyncio.to_thread(_busy, leases, thread_id, wait)
        await asyncio.sleep(min(delay, left))
        delay = min(delay * 2, 0.25)
    _RENEWER.add(lease)
    return lease


class _Asking:
    """One question for a lease, asked in a worker thread, that its asker may abandon (it was
    cancelled): a worker thread cannot be stopped, so a lease it wins after that, or won just
    before, is given back rather than left taken until it expires."""

    def __init__(self, leases: Leases, thread_id: str) -> None:
        self.leases, self.thread_id = leases, thread_id
        self._lock = threading.Lock()
        self._abandoned = False
        self._won: Lease | None = None

    def __call__(self) -> Lease | None:
        lease = self.leases.take(self.thread_id)
        with self._lock:
            if not self._abandoned:
                self._won = lease
                return lease
        if lease is not None:
            give_back(lease)
        return None

    def abandon(self) -> None:
        with self._lock:
            self._abandoned = True
            won, self._won = self._won, None
        if won is not None:  # won, but the asker was gone before it heard: release off the loop
            threading.Thread(target=give_back, args=(won,), name="turnkit-lease-release").start()


def give_back(lease: Lease) -> None:
    """End the lease (its run is over: finished, paused at an interrupt, or failed). A release
    that fails is logged, never raised: it must not replace the run's own outcome, and the
    thread is freed anyway when the lease expires or its session ends."""
    _RENEWER.discard(lease)
    try:
        lease.leases.release(lease)
    except Exception:  # the database's own error, whichever backend: logged, see above
        log.warning("could not give back the lease %s on thread %r", lease.name,
                    lease.thread_id, exc_info=True)  # fmt: skip


async def agive_back(lease: Lease) -> None:
    """``give_back`` without blocking the event loop; it completes even if the awaiting task is
    cancelled meanwhile (the release runs on in its worker thread)."""
    if not lease.leases.blocking:
        give_back(lease)
        return
    await asyncio.shield(asyncio.to_thread(give_back, lease))


class _Renewer:
    """One daemon thread per process renewing the leases that expire (lock rows) while their
    runs go on, at a third of their time to live. A lease it cannot renew (another run took the
    thread after this process stalled past the expiry) fails that run's next ``fence``."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        """Start empty: in a child made by ``fork``, the parent's thread does not exist."""
        self._leases: set[Lease] = set()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None

    def add(self, lease: Lease) -> None:
        if not lease.leases.renews:
            return
        with self._wake:
            self._leases.add(lease)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="turnkit-lease-renewer", daemon=True
                )
                self._thread.start()
            self._wake.notify()

    def discard(self, lease: Lease) -> None:
        if lease.leases.renews:
            with self._wake:
                self._leases.discard(lease)

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._leases:
                    self._wake.wait()
                now = time.monotonic()
                due = [x for x in self._leases if x.deadline - now < _ttl(x) * 2 / 3]
                pause = min(_ttl(x) for x in self._leases) / 6
            for lease in due:
                try:
                    renewed = lease.leases.renew(lease)
                except Exception:  # the database is unreachable now: try again next time
                    log.warning("could not renew the lease %s", lease.name, exc_info=True)
                    continue
                if not renewed:  # taken over, or given back meanwhile
                    lease.deadline = 0.0  # its next fence asks, and fails if it was taken
                    self.discard(lease)
            with self._wake:
                self._wake.wait(max(pause, 0.02))


def _ttl(lease: Lease) -> float:
    assert isinstance(lease.leases, ThreadLeases)  # only expiring leases are renewed
    return lease.leases.ttl


_RENEWER = _Renewer()
os.register_at_fork(after_in_child=_RENEWER._reset)
