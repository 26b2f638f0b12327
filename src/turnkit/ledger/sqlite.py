"""``SqliteLedger``: the default ledger, one SQLite file shared by threads and processes.

WAL journaling lets readers proceed while one writer writes; a busy timeout makes a second process
wait for the lock instead of failing. Every statement is its own transaction (autocommit), on a
connection taken from the ledger's idle ones for that statement, or opened when all are busy: as
many connections as statements run at once, whichever threads run them. (A connection per thread
opened one for every thread that ever wrote: ``create_agent``'s tools node runs each step in a
thread of its own, so a connection a turn, kept until the ledger closed.)

A file turnkit creates is readable and writable by its owner only (``0600``: it holds the
held arguments, the audit and the keys' hashes); SQLite gives its ``-wal`` and ``-shm`` files
the database file's mode. An existing file keeps its mode.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from turnkit.errors import StorageError
from turnkit.ledger.base import Ledger
from turnkit.ledger.schema import column_additions
from turnkit.ledger.urls import sqlite_problem

__all__ = ["SqliteLedger", "create_private", "wal_mode", "writer_lock"]

_WRITERS: dict[str, threading.RLock] = {}
_WRITERS_LOCK = threading.Lock()


def writer_lock(path: str) -> threading.RLock:
    """The lock this process's writers to the SQLite file at ``path`` hold while they write (the
    ledger's statements, the checkpointer's transactions: ``open_storage`` puts both in one
    file). Without it two connections of one process writing at once meet in SQLite's busy
    handler, which sleeps 1, 2, 5, 10 ... ms between tries: measured, a tool call's audit row
    waited ~0.6 ms for ``create_agent``'s checkpoint, written meanwhile in the background
    (LangGraph's ``async`` durability). Other processes still meet in the busy handler."""
    key = os.path.realpath(path)
    with _WRITERS_LOCK:
        return _WRITERS.setdefault(key, threading.RLock())


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
        self._all: list[sqlite3.Connection] = []
        self._idle: list[sqlite3.Connection] = []  # open, running nothing: the next to use
        self._using: set[sqlite3.Connection] = set()  # running a statement now
        self._doomed: set[sqlite3.Connection] = set()  # closed once their statement ends
        self._lock = threading.Lock()
        self._writer = writer_lock(self.path)
        self.setup()

    def _connect(self) -> sqlite3.Connection:
        """A new connection, in WAL mode, with the busy timeout."""
        conn = sqlite3.connect(
            self.path,
            timeout=self._busy_timeout,
            isolation_level=None,
            check_same_thread=False,  # one thread at a time: the statement's (``_statement``)
        )
        conn.execute(f"PRAGMA busy_timeout={int(self._busy_timeout * 1000)}")
        wal_mode(conn, self._busy_timeout)
        conn.execute("PRAGMA synchronous=NORMAL")
        with self._lock:
            self._all.append(conn)
        return conn

    def _run(self, sql: str, params: Sequence[Any] = ()) -> int:
        with self._writer, self._statement() as conn:
            return conn.execute(sql, tuple(params)).rowcount

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        reads = sql.lstrip()[:6].upper() == "SELECT"  # else it writes (``... RETURNING``)
        with contextlib.nullcontext() if reads else self._writer, self._statement() as conn:
            return conn.execute(sql, tuple(params)).fetchall()

    @contextlib.contextmanager
    def _statement(self) -> Iterator[sqlite3.Connection]:
        """An idle connection (or a new one) for one statement, idle again after it. ``close``
        from another thread meanwhile (an executor closed while a cancelled call still writes
        its audit row) leaves it to this statement's end: closing a connection under a running
        statement crashes sqlite3."""
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = self._connect()
        with self._lock:
            self._using.add(conn)
        try:
            yield conn
        finally:
            with self._lock:
                self._using.discard(conn)
                if conn in self._doomed:
                    self._doomed.discard(conn)
                    conn.close()
                elif conn in self._all:  # not closed by ``close`` meanwhile
                    self._idle.append(conn)

    def _upgrade(self) -> None:
        """Add the columns an older ledger lacks in one immediate transaction: of processes
        opening an old file at once, one adds them and the others then find them there."""
        if not column_additions(self._columns):
            return
        with self._writer, self._statement() as conn:
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
