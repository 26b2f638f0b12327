"""A run's lease on its thread: taken before the run reads the thread, checked before each write,
renewed while it runs, given back at its end (``turnkit.registry.ledger.leases`` keeps them).

The lease travels in the run's config (``configurable["__turnkit_lease"]``), which LangGraph hands
to every node and to every checkpoint write of the run; ``fence`` is the check both make.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping
from typing import Any

from turnkit.errors import LeaseLost, ThreadBusy
from turnkit.registry.ledger.leases import Lease, LocalLeases, ThreadLeases

__all__ = ["LEASE_KEY", "agive_back", "atake", "fence", "give_back", "lease_of", "take"]

LEASE_KEY = "__turnkit_lease"
"""The run config's key for the run's ``Lease`` (``__``: LangGraph keeps it out of metadata)."""

Leases = ThreadLeases | LocalLeases


def lease_of(config: Mapping[str, Any] | None) -> Lease | None:
    """The lease of the run whose config this is, if it holds one."""
    if not config:
        return None
    lease = (config.get("configurable") or {}).get(LEASE_KEY)
    return lease if isinstance(lease, Lease) else None


def fence(lease: Lease) -> None:
    """Raise ``LeaseLost`` unless ``lease`` is still its thread's: at no cost while its expiry is
    well ahead (or, on PostgreSQL, its lock's session is open), else by asking the database."""
    if lease.vouched() or lease.confirm():
        return
    raise LeaseLost(
        f"this run lost its lease on thread {lease.thread_id!r} ({lease.name}): it ran past the"
        " lease's expiry without renewing it, or its database session ended, so another run may"
        " hold the thread now. Nothing more of this run was written; run the turn again to go on"
        " from the thread's latest checkpoint.",
        thread_id=lease.thread_id,
        holder=lease.leases.holder(lease.thread_id),
    )


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
        ThreadBusy: another run still held it when ``wait`` ran out (at once when 0).
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
    """``take`` without blocking the event loop (a database is asked in a worker thread)."""

    async def attempt() -> Lease | None:
        if isinstance(leases, LocalLeases):  # memory only: nothing blocks
            return leases.take(thread_id)
        return await asyncio.to_thread(leases.take, thread_id)

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


def give_back(lease: Lease) -> None:
    """End the lease (its run is over: finished, paused at an interrupt, or failed)."""
    _RENEWER.discard(lease)
    lease.leases.release(lease)


async def agive_back(lease: Lease) -> None:
    """``give_back`` without blocking the event loop; it completes even if the awaiting task is
    cancelled meanwhile (the release runs on in its worker thread)."""
    if isinstance(lease.leases, LocalLeases):
        give_back(lease)
        return
    await asyncio.shield(asyncio.to_thread(give_back, lease))


class _Renewer:
    """One daemon thread per process renewing the leases that expire (SQLite rows) while their
    runs go on, at a third of their time to live. A lease it cannot renew (another run took the
    thread after this process stalled past the expiry) fails that run's next ``fence``."""

    def __init__(self) -> None:
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
                due = [x for x in self._leases if x.expires_at - time.time() < _ttl(x) * 2 / 3]
                pause = min(_ttl(x) for x in self._leases) / 6
            for lease in due:
                try:
                    renewed = lease.leases.renew(lease)
                except Exception:  # the database is unreachable: try again next time
                    continue
                if not renewed:
                    lease.expires_at = 0.0  # lost: its next fence asks, and fails
                    self.discard(lease)
            with self._wake:
                self._wake.wait(max(pause, 0.02))


def _ttl(lease: Lease) -> float:
    return getattr(lease.leases, "ttl", 30.0)


_RENEWER = _Renewer()
