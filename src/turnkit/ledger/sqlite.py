"""``SqliteLedger``: the default ledger, one SQLite file shared by threads and processes.

WAL journaling lets readers proceed while one writer writes; a busy timeout makes a second process
wait for the lock instead of failing. Every statement is its own transaction (autocommit). A thread
keeps the connection it was given (sqlite3 connections are not used by two threads at once) and
gives it back, idle, when it ends; a new thread takes an idle one before one is opened. So there
are as many connections as threads alive that wrote, not as threads that ever did:
``create_agent``'s tools node runs each step in a thread of its own, and a connection kept per
such thread was one a turn, open until the ledger closed.

A file turnkit creates is readable and writable by its owner only (``0600``: it holds the
held arguments, the audit and the keys' hashes); SQLite gives its ``-wal`` and ``-shm`` files
the database file's mode. An existing file keeps its mode.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

from turnkit.errors import StorageError
from turnkit.ledger.base import Ledger
from turnkit.ledger.schema import column_additions
from turnkit.ledger.urls import sqlite_problem

__all__ = ["SqliteLedger", "create_private", "wal_mode"]


class _Held:
    """A thread's hold on one of the ledger's connections, in its thread-local data. When the
    thread ends it is collected and gives the connection back; when the ledger is collected first
    (dropped without ``close``), the connection goes with it, as sqlite3 closes a connection
    nobody holds."""

    __slots__ = ("conn", "ledger")

    def __init__(self, conn: sqlite3.Connection, ledger: SqliteLedger) -> None:
        self.conn = conn
        self.ledger = weakref.ref(ledger)

    def __del__(self) -> None:
        ledger = self.ledger()
        if ledger is not None:
            ledger._give_back(self.conn)


_HAS_ROOM = (
    "NOT EXISTS (SELECT 1 FROM turnkit_rate_usage WHERE caller_identity = ? AND window_start = ?"
    " AND units + ? > ?)"
)
"""One identity has room: its usage in the window, if any, plus the units stays within the limit."""


@functools.lru_cache(maxsize=8)
def _charge_sql(count: int) -> str:
    """``SqliteLedger.charge_all``'s statement for ``count`` identities (written once each)."""
    rows = ", ".join("(?, ?, ?)" for _ in range(count))
    room = " AND ".join(_HAS_ROOM for _ in range(count))
    return (
        "INSERT INTO turnkit_rate_usage (caller_identity, window_start, units)"
        f" SELECT column1, column2, column3 FROM (VALUES {rows}) WHERE {room}"
        " ON CONFLICT (caller_identity, window_start) DO UPDATE"
        " SET units = turnkit_rate_usage.units + excluded.units"
    )


class SqliteLedger(Ledger):
    """A ledger in the SQLite file at ``path`` (created with its tables when missing).

    Examples:
        >>> ledger = SqliteLedger("/tmp/turnkit-doctest.sqlite")
        >>> ledger.set_setting("confirm_batch_over", 20)
        >>> ledger.settings()["confirm_batch_over"]
        20
    """

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 30.0) -> None:
        self.path = os.fspath(path)
        if self.path in ("", ":memory:") or self.path.startswith("file:"):
            raise StorageError(
                f"SqliteLedger needs a file path, got {self.path!r}: an in-memory database would"
                " be a different empty one in every thread"
            )
        problem = sqlite_problem(self.path)
        if problem is not None:
            raise StorageError(f"cannot open the ledger {self.path!r}: {problem}")
        create_private(self.path)
        self._busy_timeout = busy_timeout
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._idle: list[sqlite3.Connection] = []  # their threads have ended: the next to use
        self._using: set[sqlite3.Connection] = set()  # running a statement now
        self._doomed: set[sqlite3.Connection] = set()  # closed once their statement ends
        self._lock = threading.Lock()
        self.setup()

    def _connect(self) -> sqlite3.Connection:
        """A new connection, in WAL mode, with the busy timeout."""
        conn = sqlite3.connect(
            self.path,
            timeout=self._busy_timeout,
            isolation_level=None,
            check_same_thread=False,  # one thread at a time: its thread's, then an idle one
        )
        conn.execute(f"PRAGMA busy_timeout={int(self._busy_timeout * 1000)}")
        wal_mode(conn, self._busy_timeout)
        conn.execute("PRAGMA synchronous=NORMAL")
        with self._lock:
            self._all.append(conn)
        return conn

    def _run(self, sql: str, params: Sequence[Any] = ()) -> int:
        conn = self._begin()
        try:
            return conn.execute(sql, tuple(params)).rowcount
        finally:
            self._end(conn)

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        conn = self._begin()  # as ``_statement``, without a generator: every call runs three
        try:
            return conn.execute(sql, tuple(params)).fetchall()
        finally:
            self._end(conn)

    def charge_all(
        self, identities: Sequence[str], window_start: int, units: int, limit: int
    ) -> bool:
        """``Ledger.charge_all`` in one statement that ends in the step that writes: all of
        ``identities`` are charged when none lacks room, else none is.

        Not the base's ``RETURNING``: SQLite commits such a statement only once its rows are
        read, and reading them takes the GIL back first, so the file's write lock was held
        across a GIL wait (a switch interval, 5 ms, or more) while every other writer of the file
        slept in SQLite's busy handler (1 ms, then 2, 5, 10...). Under 50 clients on three
        workers that left the machine idle at ~1,500 requests/s; this way ~2,200-2,600
        (``docs/performance.md``). The room is checked inside the same statement: SQLite
        takes the write lock before the statement reads, so no other writer comes between
        (on PostgreSQL it could, hence the base's per-row condition there). Each identity's
        room is its own lookup by the key (``_HAS_ROOM``): an ``IN`` list over them made SQLite
        build a temporary b-tree for the list on every call."""
        if units > limit:
            return False
        params: list[Any] = []
        for identity in identities:
            params += (identity, window_start, units)
        for identity in identities:
            params += (identity, window_start, units, limit)
        return self._run(_charge_sql(len(identities)), params) == len(identities)

    def _connection(self) -> sqlite3.Connection:
        """This thread's connection: the one it was given, else an idle one, else a new one."""
        held = getattr(self._local, "held", None)
        if held is not None:
            return held.conn
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = self._connect()
        self._local.held = _Held(conn, self)
        return conn

    def _give_back(self, conn: sqlite3.Connection) -> None:
        """A thread has ended (its thread-local data went): its connection is idle."""
        with self._lock:
            if conn in self._all and conn not in self._idle:  # not closed by ``close``
                self._idle.append(conn)

    @contextlib.contextmanager
    def _statement(self) -> Iterator[sqlite3.Connection]:
        """This thread's connection for one statement. ``close`` from another thread meanwhile
        (an executor closed while a cancelled call still writes its audit row) leaves it to
        this statement's end: closing a connection under a running statement crashes sqlite3."""
        conn = self._begin()
        try:
            yield conn
        finally:
            self._end(conn)

    def _begin(self) -> sqlite3.Connection:
        """This thread's connection, marked as running a statement (``_statement``)."""
        conn = self._connection()
        with self._lock:
            self._using.add(conn)
        return conn

    def _end(self, conn: sqlite3.Connection) -> None:
        """``conn``'s statement ended: closed now if ``close`` was called meanwhile."""
        with self._lock:
            self._using.discard(conn)
            if conn in self._doomed:
                self._doomed.discard(conn)
                conn.close()

    def _upgrade(self) -> None:
        """Add the columns an older ledger lacks in one immediate transaction: of processes
        opening an old file at once, one adds them and the others then find them there."""
        if not column_additions(self._columns):
            return
        with self._statement() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                for statement in column_additions(lambda table: _columns(conn, table)):
                    conn.execute(statement)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def close(self) -> None:
        """Close the connections (and, for a session, its executor and storage); one running a
        statement in another thread is closed when that statement ends."""
        with self._lock:
            for conn in self._all:
                if conn in self._using:
                    self._doomed.add(conn)
                else:
                    conn.close()
            self._all.clear()
            self._idle.clear()
        self._local = threading.local()

    def __repr__(self) -> str:
        return f"SqliteLedger({self.path!r})"


def create_private(path: str) -> None:
    """Create the file at ``path``, empty, with mode ``0600`` when there is none (SQLite takes an
    empty file as a new database); an existing file is left as it is.

    ``os.open`` with the mode and ``O_EXCL``: no change of the process's umask, which other
    threads share, and no race with another process creating the file.
    """
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {str(row[1]) for row in conn.execute(f"PRAGMA table_info({table})")}


def wal_mode(conn: sqlite3.Connection, patience: float) -> None:
    """Switch ``conn``'s file to WAL. SQLite refuses the switch at once, without its busy wait,
    while another connection holds a lock (processes opening one fresh file together), so it is
    tried again for up to ``patience`` seconds: the one retry of a busy SQLite in turnkit."""
    deadline = time.monotonic() + patience
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)
