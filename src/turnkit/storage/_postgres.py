"""The PostgreSQL backend of ``turnkit.storage`` (the ``postgres`` extra).

``PostgresSaver.setup()`` runs the checkpointer's migrations and must run on an autocommit
connection (``autocommit=True, prepare_threshold=0, row_factory=dict_row``). Processes setting up
one fresh database at once race on the tables (``UniqueViolation``), so setup (the saver's and the
ledger's) runs under an advisory lock. A process waiting for it waits idle (LISTEN), never inside
a statement: a waiting statement holds a snapshot, and the saver's ``CREATE INDEX CONCURRENTLY``
waits for every older snapshot — a deadlock. The savers then use a connection pool.

Behind a pooler in transaction mode (``pooler=transaction`` in the URL) a session is not ours: a
session lock may be taken on one server connection and released on another (it leaks, and another
client landing on the first one re-enters it), and a notification reaches whoever holds that
server connection. There the lock is transaction-scoped instead, held on one connection (the pooler
keeps a transaction on one server connection) while the setup runs on a second one in autocommit;
a waiter retries ``pg_try_advisory_xact_lock`` after a short sleep, holding nothing in between. And
nothing is prepared (``prepare_threshold=None``): PgBouncer before 1.21 keeps no prepared
statements. A direct connection is opened exactly as before.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from types import ModuleType
from typing import Any, NamedTuple

from turnkit.ledger import Ledger
from turnkit.ledger.urls import PostgresTarget, pooler_problem, postgres_target

__all__ = ["aopen_postgres", "open_postgres"]

POOL_SIZE = 8
"""Most connections the checkpointer's pool opens (the ledger has its own pool, as big);
``pool_size=N`` in the URL sets both."""
SETUP_LOCK = 0x7475726E6B6974
"""The advisory lock key held while tables are created ("turnkit" in ASCII)."""
SETUP_DONE = "turnkit_setup_done"
"""The channel notified when the lock is released."""
SETUP_TIMEOUT = 300.0
"""Seconds to wait for another process's setup before giving up."""
_TRY_LOCK = "SELECT pg_try_advisory_lock(%s) AS locked"
_TRY_XACT_LOCK = f"SELECT pg_try_advisory_xact_lock({SETUP_LOCK}) AS locked"
"""Sent without parameters, so by the simple protocol: a parameterized query leaves its portal
open until the transaction ends, and the portal's snapshot would make the saver's ``CREATE INDEX
CONCURRENTLY`` (on the other connection) wait for this transaction, which waits for it."""
_RETRY_DELAYS = (0.01, 0.02, 0.05, 0.1, 0.2)
"""Seconds between a waiter's tries behind a pooler (the last one repeats)."""


class _Modules(NamedTuple):
    psycopg: ModuleType
    pool: ModuleType
    saver: ModuleType
    aio: ModuleType
    ledger: ModuleType
    batching: ModuleType


def _modules() -> _Modules:
    """The postgres extra's modules, or an ImportError that says how to install them."""
    try:
        import psycopg
        import psycopg.rows
        import psycopg_pool
        from langgraph.checkpoint import postgres
        from langgraph.checkpoint.postgres import aio

        from turnkit.ledger import postgres as ledger
        from turnkit.threads import batching
    except ImportError as exc:
        raise ImportError(
            f"PostgreSQL storage needs the postgres extra ({exc.name or exc} is missing):"
            " pip install 'turnkit[postgres]'"
        ) from exc
    return _Modules(psycopg, psycopg_pool, postgres, aio, ledger, batching)


def _check(deadline: float) -> None:
    if time.monotonic() > deadline:
        raise TimeoutError(
            f"another process has been setting up the database for over {SETUP_TIMEOUT:.0f} s"
        )


def _settings(m: _Modules, target: PostgresTarget) -> dict[str, Any]:
    """Connection settings the LangGraph savers need (nothing prepared behind a pooler)."""
    prepare = None if target.pooler else 0
    return {
        "autocommit": True,
        "prepare_threshold": prepare,
        "row_factory": m.psycopg.rows.dict_row,
    }


def _delays() -> Iterator[float]:
    """The sleeps between a waiter's tries behind a pooler: short first, then every 0.2 s."""
    yield from _RETRY_DELAYS
    while True:
        yield _RETRY_DELAYS[-1]


def open_postgres(url: str) -> tuple[Any, Ledger, Callable[[], None]]:
    """A ``PostgresSaver`` on a pool, the ``PostgresLedger``, and a function closing both."""
    m = _modules()
    target = postgres_target(url)
    kwargs = _settings(m, target)
    m.ledger.reachable(target.conninfo)  # an unreachable server: a StorageError now, with why
    try:
        ledger = (_setup_behind_pooler if target.pooler else _setup)(m, url, target, kwargs)
    except m.psycopg.Error as exc:
        problem = pooler_problem(url, exc)
        if problem is None:
            raise
        raise problem from exc
    try:
        pool = m.pool.ConnectionPool(
            target.conninfo,
            min_size=1,
            max_size=target.pool_size or POOL_SIZE,
            kwargs=kwargs,
            open=True,
            name="turnkit-saver",
        )
    except BaseException:
        ledger.close()
        raise

    def close() -> None:
        try:
            pool.close()
        finally:
            ledger.close()

    return m.batching.postgres_saver(pool), ledger, close


def _setup(m: _Modules, url: str, target: PostgresTarget, kwargs: dict[str, Any]) -> Ledger:
    """Set the database up under a session lock, waiting idle (LISTEN) for another process's."""
    with m.psycopg.Connection.connect(target.conninfo, **kwargs) as conn:
        conn.execute(f"LISTEN {SETUP_DONE}")
        deadline = time.monotonic() + SETUP_TIMEOUT
        while not conn.execute(_TRY_LOCK, (SETUP_LOCK,)).fetchone()["locked"]:
            _check(deadline)
            for _ in conn.notifies(timeout=1.0, stop_after=1):  # woken when it is released
                pass
        try:
            m.saver.PostgresSaver(conn).setup()
            return m.ledger.PostgresLedger(url)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (SETUP_LOCK,))
            conn.execute(f"NOTIFY {SETUP_DONE}")


def _setup_behind_pooler(
    m: _Modules, url: str, target: PostgresTarget, kwargs: dict[str, Any]
) -> Ledger:
    """Set the database up on one connection while another holds the lock in a transaction."""
    connect = m.psycopg.Connection.connect
    deadline = time.monotonic() + SETUP_TIMEOUT
    with connect(target.conninfo, **kwargs) as lock, connect(target.conninfo, **kwargs) as conn:
        delays = _delays()
        while True:
            with lock.transaction():  # commit releases the lock (or nothing, when not taken)
                if lock.execute(_TRY_XACT_LOCK).fetchone()["locked"]:
                    m.saver.PostgresSaver(conn).setup()
                    return m.ledger.PostgresLedger(url)
            _check(deadline)
            time.sleep(next(delays))


async def aopen_postgres(url: str) -> tuple[Any, Ledger, Callable[[], Awaitable[None]]]:
    """An ``AsyncPostgresSaver`` on an async pool, the ledger, and a coroutine closing both."""
    m = await asyncio.to_thread(_modules)  # first imports read files: keep them off the loop
    target = postgres_target(url)
    kwargs = _settings(m, target)
    await asyncio.to_thread(m.ledger.reachable, target.conninfo)
    setup = _asetup_behind_pooler if target.pooler else _asetup
    try:
        ledger = await setup(m, url, target, kwargs)
    except m.psycopg.Error as exc:
        problem = pooler_problem(url, exc)
        if problem is None:
            raise
        raise problem from exc
    try:
        pool = m.pool.AsyncConnectionPool(
            target.conninfo,
            min_size=1,
            max_size=target.pool_size or POOL_SIZE,
            kwargs=kwargs,
            open=False,
            name="turnkit-saver",
        )
        await pool.open()
    except BaseException:
        await asyncio.to_thread(ledger.close)
        raise

    async def aclose() -> None:
        try:
            await pool.close()
        finally:
            await asyncio.to_thread(ledger.close)

    return m.batching.async_postgres_saver(pool), ledger, aclose


async def _asetup(m: _Modules, url: str, target: PostgresTarget, kwargs: dict[str, Any]) -> Ledger:
    """As ``_setup``, without blocking the event loop."""
    async with await m.psycopg.AsyncConnection.connect(target.conninfo, **kwargs) as conn:
        await conn.execute(f"LISTEN {SETUP_DONE}")
        deadline = time.monotonic() + SETUP_TIMEOUT
        while not (await (await conn.execute(_TRY_LOCK, (SETUP_LOCK,))).fetchone())["locked"]:
            _check(deadline)
            async for _ in conn.notifies(timeout=1.0, stop_after=1):
                pass
        try:
            await m.aio.AsyncPostgresSaver(conn).setup()
            return await asyncio.to_thread(m.ledger.PostgresLedger, url)
        finally:
            await conn.execute("SELECT pg_advisory_unlock(%s)", (SETUP_LOCK,))
            await conn.execute(f"NOTIFY {SETUP_DONE}")


async def _asetup_behind_pooler(
    m: _Modules, url: str, target: PostgresTarget, kwargs: dict[str, Any]
) -> Ledger:
    """As ``_setup_behind_pooler``, without blocking the event loop."""
    connect = m.psycopg.AsyncConnection.connect
    deadline = time.monotonic() + SETUP_TIMEOUT
    async with (
        await connect(target.conninfo, **kwargs) as lock,
        await connect(target.conninfo, **kwargs) as conn,
    ):
        delays = _delays()
        while True:
            async with lock.transaction():
                if (await (await lock.execute(_TRY_XACT_LOCK)).fetchone())["locked"]:
                    await m.aio.AsyncPostgresSaver(conn).setup()
                    return await asyncio.to_thread(m.ledger.PostgresLedger, url)
            _check(deadline)
            await asyncio.sleep(next(delays))
