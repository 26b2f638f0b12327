"""Thread leases in the ledger's database: one writer per conversation thread, across processes.

A run that writes a thread's checkpoints takes the thread's lease first and gives it back at its
end. Each taking gets a new **fencing token**, and a run checks that the thread is still its own
before each write (``turnkit.threads.leases.fence``).

- **Lock rows with an expiry** (``ThreadLeases``: SQLite, and PostgreSQL behind a pooler in
  transaction mode, where no session outlives a transaction). Taking is one conditional upsert
  (``... WHERE expires_at <= now``), atomic across processes: on PostgreSQL it returns the new
  token; on SQLite the token is read first (a held lease is left alone) and the upsert takes the
  lease only from it (a ``RETURNING`` statement would keep SQLite's write lock until its rows are
  read); the holder renews the row while it runs; a holder that died is replaced once its expiry has
  passed. Expiries are written and compared in the database's clock, so the clocks of the machines
  do not matter; a holder vouches for its lease from its own monotonic clock, started before it
  asked (the row cannot expire sooner than that).
- **Advisory locks** (``PostgresLeases``, in ``ledger/postgres.py``: PostgreSQL, directly): a
  transaction-level lock held by an open transaction for the run, which the server releases the
  moment the holder's session ends (a killed process needs no expiry).
- **Process memory** (``LocalLeases``), for a checkpointer that lives in one process.

Waiting, renewing and the graph's use of a lease live in ``turnkit.threads.leases``.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from turnkit.ledger.sql import Statements

__all__ = ["HOLDER", "Lease", "LocalLeases", "ThreadLeases"]

TRIES = 3
"""How often a SQLite take reads the token and upserts from it before it answers busy: each
retry follows another run's taking in between (progress, not a wait)."""

HOLDER = f"{socket.gethostname()}:{os.getpid()}"
"""The holder of a lease this process takes (host and pid), shown to the run that finds it busy."""


def _machine() -> str:
    """Where this process's pid means something: the boot of the machine and the pid namespace
    (two containers on one host, or one machine before and after a reboot, differ)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return f"{boot}/{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:  # not Linux: the host's name (one pid namespace per host)
        return socket.gethostname()


MACHINE = _machine()
"""Where a lease's holder runs; a lease taken by a dead process of this same machine is free."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


SQLITE_NOW = "((julianday('now') - 2440587.5) * 86400.0)"
"""SQLite's clock, in seconds since 1970 (``unixepoch('subsec')`` needs SQLite 3.42)."""
POSTGRES_NOW = "extract(epoch FROM clock_timestamp())::double precision"
"""PostgreSQL's clock, in seconds since 1970."""


@dataclass(eq=False)
class Lease:
    """One run's lease on one thread: its fencing token, and until when it is surely the run's."""

    thread_id: str
    token: int
    holder: str
    deadline: float
    """``time.monotonic()`` until which no other run can take the lease (``inf``: until it is
    given back, or its database session ends)."""
    leases: ThreadLeases | LocalLeases = field(repr=False)
    session: Any = field(default=None, repr=False)
    """The backend's handle (PostgreSQL: the connection whose open transaction has the lock)."""
    overrides: dict[str, Any] | None = field(default=None, repr=False)
    """The operator's setting overrides, when the backend read them in the lease's own round
    trip (PostgreSQL): the run's one settings read, which ``list_tools`` then need not make."""

    @property
    def name(self) -> str:
        """``holder#token``: the holder and this taking of the lease."""
        return f"{self.holder}#{self.token}"

    def vouched(self) -> bool:
        """Whether the lease is certainly still this run's, without asking the database."""
        return self.leases.vouched(self)

    def recheck(self) -> bool:
        """Ask the database: is the lease still this run's? (renewing it where that applies)."""
        return self.leases.recheck(self)


class ThreadLeases:
    """Lease rows with an expiry in a ledger's database, SQL written once for every backend."""

    renews = True
    """Whether a holder must renew its leases while it runs (rows with expiry do)."""
    blocking = True
    """Whether its operations wait on a database (async code runs them in a worker thread)."""

    def __init__(
        self,
        ledger: Statements,
        ttl: float = 30.0,
        *,
        now: str = SQLITE_NOW,
        returning: bool = False,
    ) -> None:
        """``returning``: take in one statement that returns the new token (PostgreSQL, where
        ``RETURNING`` holds nothing). Without it (SQLite) the token is read first and the
        taking is an upsert conditioned on it: SQLite commits a ``RETURNING`` statement only
        once its rows are read, after ``sqlite3`` takes the GIL back, so the file's write lock
        would be held across that wait while every other writer sleeps (docs/performance.md,
        "the charge held the write lock")."""
        self.ledger = ledger
        self.ttl = ttl
        self._returning = returning
        take = (
            "INSERT INTO turnkit_thread_leases (thread_id, token, holder, machine, expires_at)"
            f" VALUES (?, {'1' if returning else '?'}, ?, ?, {now} + ?)"
            " ON CONFLICT (thread_id) DO UPDATE SET token = "
            + ("turnkit_thread_leases.token + 1" if returning else "excluded.token")
            + ", holder = excluded.holder, machine = excluded.machine,"
            f" expires_at = excluded.expires_at WHERE turnkit_thread_leases.expires_at <= {now}"
        )
        # the token read first: the upsert takes the lease only from that token, so the new
        # one (read + 1) is this run's alone, whoever took and gave back the thread meanwhile
        self._take = take + (
            " RETURNING token" if returning else " AND turnkit_thread_leases.token = ?"
        )
        self._token = (  # and whether it is held: a held lease is not asked of the writer
            f"SELECT token, expires_at > {now} FROM turnkit_thread_leases WHERE thread_id = ?"
        )
        self._take_from = (  # the lease of a holder found dead, if nobody took it meanwhile
            "UPDATE turnkit_thread_leases SET token = token + 1, holder = ?, machine = ?,"
            f" expires_at = {now} + ? WHERE thread_id = ? AND token = ?"
        )  # its new token is the one seen + 1: no RETURNING, on either backend
        self._renew = (  # a released row (expiry 0) stays released: a late renewal is refused
            f"UPDATE turnkit_thread_leases SET expires_at = {now} + ?"
            " WHERE thread_id = ? AND token = ? AND expires_at > 0"
        )
        self._holder = (
            "SELECT holder, token, machine FROM turnkit_thread_leases"
            f" WHERE thread_id = ? AND expires_at > {now}"
        )

    def take(self, thread_id: str) -> Lease | None:
        """The thread's lease, with a new token, or None while another run has it. A lease
        whose holder is a process of this machine that no longer exists (it crashed, or was
        killed) is taken at once rather than after its expiry."""
        asked = time.monotonic()
        token = self._taken(thread_id)
        if token is None:
            token = self._from_the_dead(thread_id)
        if token is None:
            return None
        return Lease(thread_id, token, HOLDER, asked + self.ttl, self)

    def _taken(self, thread_id: str) -> int | None:
        """The new token when the lease is now this run's; None while another run holds it
        (or kept taking it, ``TRIES`` times over, between this run's read and its upsert)."""
        if self._returning:
            rows = self.ledger._rows(self._take, (thread_id, HOLDER, MACHINE, self.ttl))
            return int(rows[0][0]) if rows else None
        for _ in range(TRIES):
            found = self.ledger._rows(self._token, (thread_id,))
            # no row: token 0, which no row has, so a row inserted meanwhile is not taken over
            token, held = (int(found[0][0]), bool(found[0][1])) if found else (0, False)
            if held:
                return None
            params = (thread_id, token + 1, HOLDER, MACHINE, self.ttl, token)
            if self.ledger._run(self._take, params) == 1:
                return token + 1
            # another run took the thread since the read (and may have given it back): again
        return None

    def _from_the_dead(self, thread_id: str) -> int | None:
        found = self.ledger._rows(self._holder, (thread_id,))
        if not found or found[0][2] != MACHINE:  # free meanwhile, or taken on another machine
            return None
        holder, token, _ = found[0]
        pid = str(holder).rpartition(":")[2]
        if not pid.isdigit() or _alive(int(pid)):
            return None
        taken = self.ledger._run(self._take_from, (HOLDER, MACHINE, self.ttl, thread_id, token))
        return int(token) + 1 if taken == 1 else None

    def renew(self, lease: Lease) -> bool:
        """Push the lease's expiry ``ttl`` ahead; False when its token is no longer current, or
        it was given back."""
        asked = time.monotonic()
        changed = self.ledger._run(self._renew, (self.ttl, lease.thread_id, lease.token))
        if changed:
            lease.deadline = asked + self.ttl
        return bool(changed)

    def release(self, lease: Lease) -> None:
        """End the lease now (the token stays, so the next taking gets a higher one)."""
        lease.deadline = 0.0
        self.ledger._run(
            "UPDATE turnkit_thread_leases SET expires_at = 0 WHERE thread_id = ? AND token = ?",
            (lease.thread_id, lease.token),
        )

    def vouched(self, lease: Lease) -> bool:
        """True while the lease's deadline is at least a second (or a quarter of the ttl) ahead
        on this process's monotonic clock: the row cannot expire before it."""
        return lease.deadline - time.monotonic() > min(1.0, self.ttl / 4)

    def recheck(self, lease: Lease) -> bool:
        """Renew the lease if its token is still current (nobody took the thread since)."""
        return self.renew(lease)

    def holder(self, thread_id: str) -> str | None:
        """``holder#token`` of the thread's current lease, or None when nobody has it."""
        rows = self.ledger._rows(self._holder, (thread_id,))
        return f"{rows[0][0]}#{rows[0][1]}" if rows else None


class LocalLeases:
    """Leases in this process's memory, for a checkpointer that lives in it (``InMemorySaver``):
    no other process can write its threads, so no database is asked."""

    renews = False
    blocking = False

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
        """Nothing to renew: True while the lease is still the run's."""
        return self.vouched(lease)

    def vouched(self, lease: Lease) -> bool:
        """Whether the lease is still the thread's."""
        return self._held.get(lease.thread_id) is lease

    recheck = vouched

    def holder(self, thread_id: str) -> str | None:
        """As ``ThreadLeases.holder``."""
        lease = self._held.get(thread_id)
        return None if lease is None else lease.name
