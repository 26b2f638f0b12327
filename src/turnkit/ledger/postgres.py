"""``PostgresLedger``: the same tables on PostgreSQL, for more than one machine.

Needs the ``postgres`` extra (psycopg 3 and psycopg-pool). Connections come from a small pool in
autocommit mode: every statement is its own transaction, and the conditional updates the ledger
relies on are atomic under PostgreSQL's row locks. A statement a connection has run a few times is
prepared (psycopg's default), which saves 20-35 µs of planning per call. Behind a pooler in
transaction mode (PgBouncer before 1.21 keeps no prepared statements) add ``pooler=transaction`` to
the URL: nothing is prepared then, and the setup's lock is already transaction-scoped.
"""

from __future__ import annotations

import select
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from turnkit.errors import StorageError
from turnkit.ledger.base import Ledger, overrides_of
from turnkit.ledger.leases import HOLDER, POSTGRES_NOW, Lease, ThreadLeases
from turnkit.ledger.schema import (
    INDEXES,
    POSTGRES_OUTBOX_FUNCTION,
    POSTGRES_TRIGGERS,
    TABLES,
    column_additions,
)
from turnkit.ledger.urls import pooler_problem, postgres_target, shown

__all__ = ["PostgresLedger", "reachable"]

_SETUP_LOCK = 0x746B6C6564676572  # "tkledger": the ledger's own lock (storage holds "turnkit")
_FUNCTION_EXISTS = "SELECT to_regprocedure(%s)"
_TRIGGER_EXISTS = (
    "SELECT 1 FROM pg_trigger WHERE tgrelid = to_regclass('turnkit_confirmations') AND tgname = %s"
)
_COLUMNS_OF = (
    "SELECT column_name FROM information_schema.columns"
    " WHERE table_schema = current_schema() AND table_name = %s"
)


class PostgresLedger(Ledger):
    """A ledger in the PostgreSQL database at ``url`` (``postgresql://user@host:port/db``).

    ``max_connections``: the most connections its pool opens (8; ``pool_size=N`` in the URL wins).
    ``prepare_threshold``: after how many runs on a connection a statement is prepared (psycopg's
    setting; ``None`` never prepares, which ``pooler=transaction`` in the URL implies).
    """

    _claim_lock = " FOR UPDATE SKIP LOCKED"
    _audit_row = "id"  # its key (schema.TABLES)

    def __init__(
        self, url: str, *, max_connections: int = 8, prepare_threshold: int | None = 5
    ) -> None:
        try:
            from psycopg_pool import ConnectionPool
        except ImportError as exc:  # the optional extra is missing
            raise ImportError(
                "PostgresLedger needs the postgres extra: pip install 'turnkit[postgres]'"
            ) from exc
        self.url = url
        target = postgres_target(url)
        if target.pooler:
            prepare_threshold = None
        self._pooler = target.pooler
        self._lock_pool_size = target.pool_size or LEASE_CONNECTIONS
        self._conninfo = target.conninfo
        self._prepare_threshold = prepare_threshold
        self._lock_pool: Any = None
        self._lock_pool_guard = threading.Lock()
        reachable(target.conninfo)
        self._pool = ConnectionPool(
            target.conninfo,
            min_size=1,
            max_size=target.pool_size or max_connections,
            kwargs={"autocommit": True, "prepare_threshold": prepare_threshold},
            open=True,
        )
        try:
            with self._told():
                self.setup()
        except BaseException:
            self._pool.close()
            raise

    def setup(self) -> None:
        """Create the tables, add the columns an older ledger lacks, the indexes and the outbox's
        trigger (``schema.POSTGRES_TRIGGERS``; each only when missing), in one transaction
        under an advisory lock, so that processes opening a database at once do not race on
        ``CREATE TABLE IF NOT EXISTS`` or ``ALTER TABLE``."""
        with self._pool.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SETUP_LOCK,))
            for statement in TABLES:
                conn.execute(statement)

            def columns_of(table: str) -> set[str]:
                return {row[0] for row in conn.execute(_COLUMNS_OF, (table,)).fetchall()}

            for statement in column_additions(columns_of):  # only when missing: no lock taken
                conn.execute(statement)
            for statement in INDEXES:  # likewise: CREATE INDEX locks the table even if it exists
                name = statement.split(" IF NOT EXISTS ")[1].split()[0]
                found = conn.execute("SELECT to_regclass(%s)", (name,)).fetchone()
                if found is None or found[0] is None:
                    conn.execute(statement)
            function, trigger = POSTGRES_TRIGGERS  # the outbox's, likewise only when missing
            if conn.execute(_FUNCTION_EXISTS, (f"{POSTGRES_OUTBOX_FUNCTION}()",)).fetchone() == (
                None,
            ):
                conn.execute(function)
            if not conn.execute(_TRIGGER_EXISTS, (POSTGRES_OUTBOX_FUNCTION,)).fetchall():
                conn.execute(trigger)

    def _run(self, sql: str, params: Sequence[Any] = ()) -> int:
        with self._told(), self._pool.connection() as conn:
            return conn.execute(sql.replace("?", "%s"), tuple(params)).rowcount

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._told(), self._pool.connection() as conn:
            return conn.execute(sql.replace("?", "%s"), tuple(params)).fetchall()

    @contextmanager
    def _told(self) -> Iterator[None]:
        """A prepared statement broken by a pooler the URL does not mention becomes a
        ``StorageError`` that says to add ``pooler=transaction`` (``urls.pooler_problem``)."""
        try:
            yield
        except Exception as exc:
            problem = pooler_problem(self.url, exc)
            if problem is None:
                raise
            raise problem from exc

    def thread_leases(self, ttl: float = 30.0) -> ThreadLeases:
        """Thread leases as advisory locks (``PostgresLeases``; ``ttl`` does not apply: the
        server frees a lease when its holder's session ends). Behind a pooler in transaction
        mode (``pooler=transaction``), lock rows that expire ``ttl`` seconds after their last
        renewal instead: an open transaction per running turn would pin one of the pooler's
        server connections for the whole turn, and enough turns at once would leave none for
        their own statements."""
        if self._pooler:
            return ThreadLeases(self, ttl, now=POSTGRES_NOW, returning=True)
        return PostgresLeases(self)

    def lock_connections(self) -> Any:
        """The pool of connections whose open transactions keep thread leases (one per running
        turn; opened on first use, at most ``LEASE_CONNECTIONS`` or the URL's ``pool_size``)."""
        with self._lock_pool_guard:
            if self._lock_pool is None:
                from psycopg_pool import ConnectionPool

                self._lock_pool = ConnectionPool(
                    self._conninfo,
                    min_size=0,
                    max_size=self._lock_pool_size,
                    kwargs={"autocommit": True, "prepare_threshold": self._prepare_threshold},
                    open=True,
                    name="turnkit-leases",
                )
            return self._lock_pool

    def close(self) -> None:
        """Close the connections (and, for a session, its executor and storage)."""
        try:
            if self._lock_pool is not None:
                self._lock_pool.close()
        finally:
            self._pool.close()

    def __repr__(self) -> str:
        return "PostgresLedger(<url hidden>)"


LEASE_CONNECTIONS = 64
"""Most turns of one process with a thread's lease at once on PostgreSQL (a connection each)."""


_TAKE = (
    "SELECT key, value FROM turnkit_settings; COMMIT;"
    " BEGIN; SET LOCAL idle_in_transaction_session_timeout = 0;"
    " SELECT CASE WHEN pg_try_advisory_xact_lock(hashtextextended(current_schema() || ':' ||"
    " {thread}, 7)) THEN set_config('application_name', {holder} || '#' ||"
    " (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, true) END"
)
"""One round trip: read the operator's settings (the run's one read of them) and end that read's
own transaction (``COMMIT``: read inside the lease's, the table would stay share-locked for the
whole run, and an ``ALTER TABLE`` would queue every later turn behind it); then open the
transaction (exempt from an idle timeout: it waits for the model), try the thread's lock, and on
success name the session ``holder#token`` for the transaction (what ``holder`` finds). The
token is the server's clock in µs: a sequence would give the lock's transaction an id, which
keeps vacuum from cleaning up while it lasts.
Sent without parameters (the simple protocol): a parameterised statement leaves a portal open
whose snapshot would stall ``CREATE INDEX CONCURRENTLY`` elsewhere for as long as the run."""
_HOLDER = (
    "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
    " WHERE l.locktype = 'advisory' AND l.granted"
    " AND ((l.classid::bigint << 32) | l.objid::bigint)"
    " = hashtextextended(current_schema() || ':' || %s, 7)"
)


class PostgresLeases(ThreadLeases):
    """Thread leases on PostgreSQL: ``pg_try_advisory_xact_lock`` on the thread, in a transaction
    that stays open for the run and ends with it (``ROLLBACK``).

    - The server releases the lock the moment that session ends, so a killed holder frees the
      thread at once: nothing expires, nothing needs renewing.
    - The fence is the session itself: while it is open and quiet the lock is certainly held; a
      session the server ended (killed, timed out, restarted) has its socket readable (the
      server's goodbye, or end of file), and the run stops.
    - Each taking gets a token (the server's clock in µs); the session carries ``holder#token``
      as its ``application_name`` while it holds the lock, which is how a run that finds the
      thread busy learns who holds it. The open transaction has no id and no snapshot.
    - Transaction-level locks work behind a pooler in transaction mode (the open transaction
      keeps its server connection). The lock's key hashes the schema and the thread id:
      advisory locks are per database, ledgers per schema.
    """

    renews = False

    def __init__(self, ledger: PostgresLedger) -> None:
        super().__init__(ledger, ttl=float("inf"), now=POSTGRES_NOW, returning=True)
        self.postgres = ledger

    def take(self, thread_id: str) -> Lease | None:
        from psycopg import sql

        pool = self.postgres.lock_connections()
        conn = pool.getconn()
        try:
            query = sql.SQL(_TAKE).format(thread=sql.Literal(thread_id), holder=sql.Literal(HOLDER))
            cursor = conn.execute(query)
            overrides = overrides_of(cursor.fetchall())
            for _ in range(4):  # past COMMIT's, BEGIN's and SET's results, to the lock's
                cursor.nextset()
            row = cursor.fetchone()
            if not row or row[0] is None:
                conn.execute("ROLLBACK")
                pool.putconn(conn)
                return None
        except BaseException:
            pool.putconn(conn)  # a connection in a failed state is discarded by the pool
            raise
        token = int(row[0].rpartition("#")[2])
        return Lease(thread_id, token, HOLDER, float("inf"), self, conn, overrides)

    def release(self, lease: Lease) -> None:
        conn, lease.session = lease.session, None
        if conn is None:
            return
        import psycopg

        try:
            conn.execute("ROLLBACK")  # ends the transaction: the lock is released
        except psycopg.Error:  # the session is gone already, and the lock with it
            pass
        finally:
            self.postgres.lock_connections().putconn(conn)  # a broken one is discarded

    def renew(self, lease: Lease) -> bool:
        return self.vouched(lease)

    def vouched(self, lease: Lease) -> bool:
        """True while the lock's session is open and quiet."""
        conn = lease.session
        if conn is None or conn.closed:
            return False
        poller = select.poll()  # select.select refuses descriptors past 1023
        poller.register(conn.fileno(), select.POLLIN | select.POLLERR | select.POLLHUP)
        return not poller.poll(0)

    recheck = vouched

    def holder(self, thread_id: str) -> str | None:
        rows = self.ledger._rows(_HOLDER, (thread_id,))
        return str(rows[0][0]) if rows and rows[0][0] else None


def reachable(url: str, timeout: float = 10.0) -> None:
    """Connect once to ``url``, so an unreachable server fails now, with a clear reason.

    A pool would retry in the background and answer only after its own timeout (30 s).

    Raises:
        StorageError: the server refused, the host is unknown, authentication failed, ...
    """
    import psycopg

    try:
        psycopg.connect(url, connect_timeout=int(timeout), autocommit=True).close()
    except psycopg.Error as exc:
        reason = " ".join(str(exc).split())[:300]
        raise StorageError(
            f"cannot connect to PostgreSQL at {shown(url)!r}: {reason}. Is the server running,"
            " and are the host, port, user and database in the URL right?"
        ) from None
