"""The SQLite backend of ``turnkit.storage``: one file, the saver's and the ledger's tables.

The saver gets its own connection to the ledger's file (``check_same_thread=False``; the saver
locks around it), with WAL journaling and the ledger's busy timeout, so the two and other
processes share the file. A fresh file is switched to WAL first: the switch needs the file's
exclusive lock, and SQLite answers "database is locked" at once, without waiting, when another
connection is writing then (processes starting together), so it is retried briefly.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import TYPE_CHECKING

from turnkit.ledger import Ledger, SqliteLedger
from turnkit.ledger.sqlite import create_private, wal_mode

if TYPE_CHECKING:  # imported when first opened: ``import turnkit`` stays light
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

__all__ = ["BUSY_TIMEOUT", "aopen_sqlite", "enter_wal", "open_sqlite"]

BUSY_TIMEOUT = 30.0
"""Seconds a SQLite connection waits for another process's write lock before failing."""
PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    f"PRAGMA busy_timeout={int(BUSY_TIMEOUT * 1000)}",
    "PRAGMA synchronous=NORMAL",  # as the ledger: in WAL mode, safe across process crashes
)


def enter_wal(path: str) -> None:
    """Put the SQLite file at ``path`` (created ``0600`` when missing: ``create_private``) in
    WAL mode (``wal_mode``)."""
    create_private(path)
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT)
    try:
        wal_mode(conn, BUSY_TIMEOUT)
    finally:
        conn.close()


def open_sqlite(path: str) -> tuple[SqliteSaver, Ledger, Callable[[], None]]:
    """A ``SqliteSaver`` and a ``SqliteLedger`` on the file at ``path``."""
    from turnkit.threads.batching import BatchingSqliteSaver

    enter_wal(path)
    ledger = SqliteLedger(path, busy_timeout=BUSY_TIMEOUT)
    try:
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT, check_same_thread=False)
        try:
            for pragma in PRAGMAS:
                conn.execute(pragma)
            saver = BatchingSqliteSaver(conn)
            saver.setup()
        except BaseException:
            conn.close()
            raise
    except BaseException:
        ledger.close()
        raise

    def close() -> None:
        try:
            conn.close()
        finally:
            ledger.close()

    return saver, ledger, close


async def aopen_sqlite(path: str) -> tuple[AsyncSqliteSaver, Ledger, Callable[[], Awaitable[None]]]:
    """An ``AsyncSqliteSaver`` (aiosqlite) and a ``SqliteLedger`` on the file at ``path``."""
    aiosqlite, aio = await asyncio.to_thread(_async_sqlite_modules)
    await asyncio.to_thread(enter_wal, path)
    ledger = await asyncio.to_thread(SqliteLedger, path, busy_timeout=BUSY_TIMEOUT)
    try:
        conn = await aiosqlite.connect(path, timeout=BUSY_TIMEOUT)
        try:
            for pragma in PRAGMAS:
                await conn.execute(pragma)
            saver = aio.AsyncSqliteSaver(conn)
            await saver.setup()
        except BaseException:
            await conn.close()
            raise
    except BaseException:
        await asyncio.to_thread(ledger.close)
        raise

    async def aclose() -> None:
        try:
            await conn.close()
        finally:
            await asyncio.to_thread(ledger.close)

    return saver, ledger, aclose


def _async_sqlite_modules() -> tuple[ModuleType, ModuleType]:
    """aiosqlite and LangGraph's async SQLite saver (imports read files: run in a thread)."""
    import aiosqlite
    from langgraph.checkpoint.sqlite import aio

    return aiosqlite, aio
