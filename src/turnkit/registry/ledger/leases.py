"""Thread leases in the ledger's database: one writer per conversation thread, across processes.

A run that writes a thread's checkpoints takes the thread's lease first and gives it back at its
end. Each taking gets a new **fencing token**, and a run checks that the thread is still its own
before each write (``turnkit.turn.leases.fence``).

- **SQLite** (``ThreadLeases``): a lock row with an expiry. Taking it is one conditional upsert
  (``... WHERE expires_at <= now``), atomic across processes; the holder renews it while it runs;
  a holder that died is replaced once its expiry has passed. Processes sharing a SQLite file share
  a clock, so a lease whose expiry is still well ahead is vouched for without a query.
- **PostgreSQL** (``PostgresLeases``, in ``ledger/postgres.py``): a transaction-level advisory
  lock held by an open transaction for the run, which the server releases the moment the
  holder's session ends (a killed process needs no expiry).

Waiting, renewing and the graph's use of a lease live in ``turnkit.turn.leases``.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from turnkit.registry.ledger.base import Ledger

__all__ = ["HOLDER", "Lease", "LocalLeases", "ThreadLeases"]

HOLDER = f"{socket.gethostname()}:{os.getpid()}"
"""Who holds a lease taken by this process (host and pid), shown to the run that finds it busy."""

_TAKE = (
    "INSERT INTO turnkit_thread_leases (thread_id, token, holder, expires_at) VALUES (?, 1, ?, ?)"
    " ON CONFLICT (thread_id) DO UPDATE SET token = turnkit_thread_leases.token + 1,"
    " holder = excluded.holder, expires_at = excluded.expires_at"
    " WHERE turnkit_thread_leases.expires_at <= ?"
    " RETURNING token"
)


@dataclass(eq=False)
class Lease:
    """One run's hold on one thread: its fencing token, and until when it is held."""

    thread_id: str
    token: int
    holder: str
    expires_at: float
    """Wall-clock time the lease ends unless renewed (``inf`` where it needs no renewal)."""
    leases: ThreadLeases | LocalLeases = field(repr=False)
    session: Any = field(default=None, repr=False)
    """The backend's hold (PostgreSQL: the connection whose transaction holds the lock)."""

    @property
    def name(self) -> str:
        """``holder#token``: the holder and this taking of the lease."""
        return f"{self.holder}#{self.token}"

    def vouched(self) -> bool:
        """Whether the lease is certainly still this run's, without asking the database."""
        return self.leases.vouched(self)

    def confirm(self) -> bool:
        """Ask the database: is the lease still this run's? (renewing it where that applies)."""
        return self.leases.confirm(self)


class ThreadLeases:
    """The lease operations of a ledger (SQLite: a lock row with expiry), SQL written once."""

    renews = True
    """Whether a holder must renew its leases while it runs (rows with expiry do)."""

    def __init__(self, ledger: Ledger, ttl: float = 30.0) -> None:
        self.ledger = ledger
        self.ttl = ttl

    def take(self, thread_id: str) -> Lease | None:
        """The thread's lease, with a new token, or None while another run holds it."""
        now = time.time()
        rows = self.ledger._rows(_TAKE, (thread_id, HOLDER, now + self.ttl, now))
        if not rows:
            return None
        return Lease(thread_id, int(rows[0][0]), HOLDER, now + self.ttl, self)

    def renew(self, lease: Lease) -> bool:
        """Push the lease's expiry ``ttl`` ahead; False when its token is no longer current."""
        expires_at = time.time() + self.ttl
        changed = self.ledger._run(
            "UPDATE turnkit_thread_leases SET expires_at = ? WHERE thread_id = ? AND token = ?",
            (expires_at, lease.thread_id, lease.token),
        )
        if changed:
            lease.expires_at = expires_at
        return bool(changed)

    def release(self, lease: Lease) -> None:
        """End the lease now (the token stays, so the next taking gets a higher one)."""
        self.ledger._run(
            "UPDATE turnkit_thread_leases SET expires_at = 0 WHERE thread_id = ? AND token = ?",
            (lease.thread_id, lease.token),
        )

    def vouched(self, lease: Lease) -> bool:
        """True while the expiry is at least a second (or a quarter of the ttl) ahead: no other
        process may take the row before it, and processes on one SQLite file share a clock."""
        return lease.expires_at - time.time() > min(1.0, self.ttl / 4)

    def confirm(self, lease: Lease) -> bool:
        """Renew the lease if its token is still current (nobody took the thread since)."""
        return self.renew(lease)

    def holder(self, thread_id: str) -> str | None:
        """``holder#token`` of the thread's current lease, or None when nobody holds it."""
        rows = self.ledger._rows(
            "SELECT holder, token, expires_at FROM turnkit_thread_leases WHERE thread_id = ?",
            (thread_id,),
        )
        if not rows or float(rows[0][2]) <= time.time():
            return None
        return f"{rows[0][0]}#{rows[0][1]}"


class LocalLeases:
    """Leases in this process's memory, for a checkpointer that lives in it (``InMemorySaver``):
    no other process can write its threads, so no database is asked."""

    renews = False

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, Lease] = {}
        self._tokens: dict[str, int] = {}

    def take(self, thread_id: str) -> Lease | None:
        """As ``ThreadLeases.take``."""
        with self._lock:
            if thread_id in self._held:
                return None
            token = self._tokens[thread_id] = self._tokens.get(thread_id, 0) + 1
            lease = self._held[thread_id] = Lease(thread_id, token, HOLDER, float("inf"), self)
            return lease

    def release(self, lease: Lease) -> None:
        """As ``ThreadLeases.release``."""
        with self._lock:
            if self._held.get(lease.thread_id) is lease:
                del self._held[lease.thread_id]

    def renew(self, lease: Lease) -> bool:
        """Nothing to renew: True while the lease is held."""
        return self.vouched(lease)

    def vouched(self, lease: Lease) -> bool:
        """Whether the lease is still the thread's."""
        return self._held.get(lease.thread_id) is lease

    confirm = vouched

    def holder(self, thread_id: str) -> str | None:
        """As ``ThreadLeases.holder``."""
        lease = self._held.get(thread_id)
        return None if lease is None else lease.name
