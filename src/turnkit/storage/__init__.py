"""One URL -> a LangGraph checkpointer and a turnkit ledger, both on the same database.

A SQLite file by default (the checkpointer's ``checkpoints``/``writes`` tables and the
``turnkit_*`` tables side by side, WAL journaling, a busy timeout), PostgreSQL at scale (the
checkpointer's migrations are run for you, once, under an advisory lock). ``open_storage`` gives
the sync savers (``invoke``/``stream``); ``open_async_storage`` the async ones (``ainvoke``/
``astream``), opened without blocking the event loop.

Examples:
    >>> from turnkit.storage import open_storage
    >>> with open_storage("/tmp/turnkit-doctest-storage.sqlite") as storage:
    ...     type(storage.checkpointer).__name__, type(storage.ledger).__name__
    ('BatchingSqliteSaver', 'SqliteLedger')
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from turnkit.errors import StorageError
from turnkit.ledger import Ledger
from turnkit.ledger.urls import parse_url, shown, sqlite_problem
from turnkit.storage._postgres import aopen_postgres, open_postgres
from turnkit.storage._sqlite import aopen_sqlite, open_sqlite

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver

__all__ = ["AsyncStorage", "OpeningAsyncStorage", "Storage", "open_async_storage", "open_storage"]


@dataclass(frozen=True, repr=False, eq=False)
class Storage:
    """A checkpointer and a ledger on one database; ``close()`` (or ``with``) releases both.

    Examples:
        >>> with open_storage("/tmp/turnkit-doctest-storage.sqlite") as storage:  # doctest: +SKIP
        ...     executor = Executor(registry, ledger=storage.ledger)
        ...     graph = build_turn_graph(executor, model, checkpointer=storage.checkpointer)
    """

    checkpointer: BaseCheckpointSaver[Any]
    """A sync LangGraph saver (``SqliteSaver`` or ``PostgresSaver``)."""
    ledger: Ledger
    """The turnkit ledger on the same database."""
    url: str
    """The URL (or path) it was opened from."""
    _close: Callable[[], None] = field(repr=False)

    def close(self) -> None:
        """Close the checkpointer's and the ledger's connections (safe to call again)."""
        self._close()

    def __enter__(self) -> Storage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Storage({shown(self.url)!r})"


@dataclass(frozen=True, repr=False, eq=False)
class AsyncStorage:
    """As ``Storage``, with async savers (``AsyncSqliteSaver``, ``AsyncPostgresSaver``).

    The ledger is the same kind as in ``Storage``: its sync methods are called by the executor in
    worker threads, and its ``a``-prefixed methods never block the event loop.
    """

    checkpointer: BaseCheckpointSaver[Any]
    """An async LangGraph saver, bound to the event loop it was opened on."""
    ledger: Ledger
    """The turnkit ledger on the same database."""
    url: str
    """The URL (or path) it was opened from."""
    _aclose: Callable[[], Awaitable[None]] = field(repr=False)

    async def aclose(self) -> None:
        """Close the checkpointer's and the ledger's connections (safe to call again)."""
        await self._aclose()

    async def __aenter__(self) -> AsyncStorage:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"AsyncStorage({shown(self.url)!r})"


def open_storage(url: str | os.PathLike[str]) -> Storage:
    """Open the checkpointer and ledger at ``url`` for sync runs (``invoke``, ``stream``).

    Args:
        url: a SQLite file path, ``sqlite:///path``, or ``postgresql://...`` (``postgres://``).
            Tables are created when missing, for both the checkpointer and the ledger. A
            PostgreSQL URL opens two pools (checkpointer, ledger) of at most 8 connections each;
            ``pool_size=N`` in its query sets both, and ``pooler=transaction`` says a pooler in
            transaction mode (PgBouncer) is in between: nothing is prepared, no session state
            is relied on. turnkit takes both options out before connecting.

    Returns:
        A ``Storage``; close it (or use it in ``with``) when done.

    Raises:
        StorageError: the URL is none of the accepted forms, or names a file that cannot be
            created (a missing folder) or a PostgreSQL server that cannot be reached; the message
            names it and says what to do. (A ``TurnkitError`` and a ``ValueError``.)
        ImportError: a PostgreSQL URL without the ``postgres`` extra installed.

    Examples:
        >>> storage = open_storage("sqlite:////tmp/turnkit-doctest-storage.sqlite")
        >>> storage
        Storage('sqlite:////tmp/turnkit-doctest-storage.sqlite')
        >>> storage.close()
    """
    text = os.fspath(url)
    kind, target = _parse(text)
    saver, ledger, close = (open_postgres if kind == "postgres" else open_sqlite)(target)
    return Storage(saver, ledger, text, close)


def open_async_storage(url: str | os.PathLike[str]) -> OpeningAsyncStorage:
    """Open the checkpointer and ledger at ``url`` for async runs (``ainvoke``, ``astream``).

    Nothing is opened until the result is awaited or entered with ``async with``; the opening
    never blocks the event loop. Accepts the same URLs as ``open_storage``; a bad URL raises
    ``StorageError`` at once.

    Args:
        url: as for ``open_storage``.

    Returns:
        An awaitable giving an ``AsyncStorage`` (close it with ``aclose()``), which is also an
        async context manager that closes it on exit.

    Examples:
        >>> async def main():  # doctest: +SKIP
        ...     async with open_async_storage("turnkit.sqlite") as storage:
        ...         graph = build_turn_graph(executor, model, checkpointer=storage.checkpointer)
        ...         await graph.ainvoke(...)
        ...     storage = await open_async_storage("postgresql://localhost/app")  # or keep one
        ...     await storage.aclose()
    """
    text = os.fspath(url)
    _parse(text)
    return OpeningAsyncStorage(text)


class OpeningAsyncStorage:
    """What ``open_async_storage`` returns: await it, or use it as an async context manager."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._storage: AsyncStorage | None = None

    def __await__(self) -> Generator[Any, None, AsyncStorage]:
        return self._open().__await__()

    async def __aenter__(self) -> AsyncStorage:
        self._storage = await self._open()
        return self._storage

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._storage is not None:
            await self._storage.aclose()

    async def _open(self) -> AsyncStorage:
        kind, target = _parse(self.url)
        opener = aopen_postgres if kind == "postgres" else aopen_sqlite
        saver, ledger, aclose = await opener(target)
        return AsyncStorage(saver, ledger, self.url, aclose)


def _parse(text: str) -> tuple[Literal["sqlite", "postgres"], str]:
    """``("postgres", url)`` or ``("sqlite", file path)``, checked: anything that cannot be opened
    is refused now, with the reason (``turnkit.ledger.urls``)."""
    kind, target = parse_url(text)
    if kind == "sqlite":
        problem = sqlite_problem(target)
        if problem is not None:
            raise StorageError(f"cannot open the storage {target!r}: {problem}")
    return kind, target
