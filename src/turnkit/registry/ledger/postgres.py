"""``PostgresLedger``: the same tables on PostgreSQL, for more than one machine.

Needs the ``postgres`` extra (psycopg 3 and psycopg-pool). Connections come from a small pool in
autocommit mode: every statement is its own transaction, and the conditional updates the ledger
relies on are atomic under PostgreSQL's row locks. A statement a connection has run a few times is
prepared (psycopg's default), which saves 20-35 µs of planning per call. Behind a pooler in
transaction mode (PgBouncer before 1.21 keeps no prepared statements) add ``pooler=transaction`` to
the URL: nothing is prepared then, and the setup's lock is already transaction-scoped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from turnkit.errors import StorageError
from turnkit.registry.ledger.base import Ledger
from turnkit.registry.ledger.schema import TABLES
from turnkit.registry.ledger.urls import postgres_target, shown

__all__ = ["PostgresLedger", "reachable"]

_SETUP_LOCK = 0x746B6C6564676572  # "tkledger": the ledger's own lock (storage holds "turnkit")


class PostgresLedger(Ledger):
    """A ledger in the PostgreSQL database at ``url`` (``postgresql://user@host:port/db``).

    ``max_connections``: the most connections its pool opens (8; ``pool_size=N`` in the URL wins).
    ``prepare_threshold``: after how many runs on a connection a statement is prepared (psycopg's
    setting; ``None`` never prepares, which ``pooler=transaction`` in the URL implies).
    """

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
        reachable(target.conninfo)
        self._pool = ConnectionPool(
            target.conninfo,
            min_size=1,
            max_size=target.pool_size or max_connections,
            kwargs={"autocommit": True, "prepare_threshold": prepare_threshold},
            open=True,
        )
        try:
            self.setup()
        except BaseException:
            self._pool.close()
            raise

    def setup(self) -> None:
        """Create the tables in one transaction under an advisory lock, so that processes
        opening a fresh database at once do not race on ``CREATE TABLE IF NOT EXISTS``."""
        with self._pool.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SETUP_LOCK,))
            for statement in TABLES:
                conn.execute(statement)

    def _run(self, sql: str, params: Sequence[Any] = ()) -> int:
        with self._pool.connection() as conn:
            return conn.execute(sql.replace("?", "%s"), tuple(params)).rowcount

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._pool.connection() as conn:
            return conn.execute(sql.replace("?", "%s"), tuple(params)).fetchall()

    def close(self) -> None:
        """Close the connections (and, for a session, its executor and storage)."""
        self._pool.close()

    def __repr__(self) -> str:
        return "PostgresLedger(<url hidden>)"


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
