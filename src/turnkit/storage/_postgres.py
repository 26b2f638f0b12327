"""The PostgreSQL backend of ``turnkit.storage`` (the ``postgres`` extra).

``PostgresSaver.setup()`` runs the checkpointer's migrations and must run on an autocommit
connection (``autocommit=True, prepare_threshold=0, row_factory=dict_row``). Processes setting up
one fresh database at once race on the tables (``UniqueViolation``), so setup (the saver's and the
ledger's) runs under an advisory lock. A process waiting for it waits idle (LISTEN), never inside
a statement: a waiting statement holds a snapshot, and the saver's ``CREATE INDEX CONCURRENTLY``
waits for every older snapshot — a deadlock. The savers then use a connection pool.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import Any, NamedTuple

from turnkit.registry.ledger import Ledger

__all__ = ["aopen_postgres", "open_postgres"]

POOL_SIZE = 8
"""Most connections the checkpointer's pool opens (the ledger has its own pool)."""
SETUP_LOCK = 0x7475726E6B6974
"""The advisory lock key held while tables are created ("turnkit" in ASCII)."""
SETUP_DONE = "turnkit_setup_done"
"""The channel notified when the lock is released."""
SETUP_TIMEOUT = 300.0
"""Seconds to wait for another process's setup before giving up."""
_TRY_LOCK = "SELECT pg_try_advisory_lock(%s) AS locked"


class _Modules(NamedTuple):
    psycopg: ModuleType
    pool: ModuleType
    saver: ModuleType
    aio: ModuleType
    ledger: ModuleType


def _modules() -> _Modules:
    """The postgres extra's modules, or an ImportError that says how to install them."""
    try:
        import psycopg
        import psycopg.rows
        import psycopg_pool
        from langgraph.checkpoint import postgres
        from langgraph.checkpoint.postgres import aio

        from turnkit.registry.ledger import postgres as ledger
    except ImportError as exc:
        raise ImportError(
            f"PostgreSQL storage needs the postgres extra ({exc.name or exc} is missing):"
            " pip install 'turnkit[postgres]'"
        ) from exc
    return _Modules(psycopg, psycopg_pool, postgres, aio, ledger)


def _check(deadline: float) -> None:
    if time.monotonic() > deadline:
        raise TimeoutError(
            f"another process has been setting up the database for over {SETUP_TIMEOUT:.0f} s"
        )


def _settings(m: _Modules) -> dict[str, Any]:
    """Connection settings the LangGraph savers need."""
    return {"autocommit": True, "prepare_threshold": 0, "row_factory": m.psycopg.rows.dict_row}


def open_postgres(url: str) -> tuple[Any, Ledger, Callable[[], None]]:
    """A ``PostgresSaver`` on a pool, the ``PostgresLedger``, and a function closing both."""
    m = _modules()
    kwargs = _settings(m)
    m.ledger.reachable(url)  # an unreachable server: a StorageError now, with the reason
    with m.psycopg.Connection.connect(url, **kwargs) as conn:
        conn.execute(f"LISTEN {SETUP_DONE}")
        deadline = time.monotonic() + SETUP_TIMEOUT
        while not conn.execute(_TRY_LOCK, (SETUP_LOCK,)).fetchone()["locked"]:
            _check(deadline)
            for _ in conn.notifies(timeout=1.0, stop_after=1):  # woken when it is released
                pass
        try:
            m.saver.PostgresSaver(conn).setup()
            ledger: Ledger = m.ledger.PostgresLedger(url)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (SETUP_LOCK,))
            conn.execute(f"NOTIFY {SETUP_DONE}")
    try:
        pool = m.pool.ConnectionPool(
            url, min_size=1, max_size=POOL_SIZE, kwargs=kwargs, open=True, name="turnkit-saver"
        )
    except BaseException:
        ledger.close()
        raise

    def close() -> None:
        try:
            pool.close()
        finally:
            ledger.close()

    return m.saver.PostgresSaver(pool), ledger, close


async def aopen_postgres(url: str) -> tuple[Any, Ledger, Callable[[], Awaitable[None]]]:
    """An ``AsyncPostgresSaver`` on an async pool, the ledger, and a coroutine closing both."""
    m = await asyncio.to_thread(_modules)  # first imports read files: keep them off the loop
    kwargs = _settings(m)
    await asyncio.to_thread(m.ledger.reachable, url)
    async with await m.psycopg.AsyncConnection.connect(url, **kwargs) as conn:
        await conn.execute(f"LISTEN {SETUP_DONE}")
        deadline = time.monotonic() + SETUP_TIMEOUT
        while not (await (await conn.execute(_TRY_LOCK, (SETUP_LOCK,))).fetchone())["locked"]:
            _check(deadline)
            async for _ in conn.notifies(timeout=1.0, stop_after=1):
                pass
        try:
            await m.aio.AsyncPostgresSaver(conn).setup()
            ledger: Ledger = await asyncio.to_thread(m.ledger.PostgresLedger, url)
        finally:
            await conn.execute("SELECT pg_advisory_unlock(%s)", (SETUP_LOCK,))
            await conn.execute(f"NOTIFY {SETUP_DONE}")
    try:
        pool = m.pool.AsyncConnectionPool(
            url, min_size=1, max_size=POOL_SIZE, kwargs=kwargs, open=False, name="turnkit-saver"
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

    return m.aio.AsyncPostgresSaver(pool), ledger, aclose
