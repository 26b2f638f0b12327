"""LangGraph's SQLite and PostgreSQL savers, able to write a step in one transaction.

With ``sync`` durability LangGraph saves each step twice: the step's task writes
(``put_writes``), then the next checkpoint (``put``), each in a transaction of its own and, on
PostgreSQL, a round trip of its own. Inside ``batched()`` every call these savers make uses one
cursor: on PostgreSQL one pipeline (one round trip, one implicit transaction ended by its sync),
on SQLite one transaction (one commit); ``AsyncPostgresSaver`` gets the same as ``abatched()``.
(LangGraph's async SQLite saver commits on its connection, not in a cursor: it is left as it is.)
``FencedSaver`` defers a run's task writes until the checkpoint that follows them and saves
both in one batch (docs/architecture.md §6).

Only the cursor each saver opens is changed; its SQL, serialisation and methods are LangGraph's.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager, asynccontextmanager, contextmanager
from contextvars import ContextVar
from typing import Any

from langgraph.checkpoint.sqlite import SqliteSaver

from turnkit.ledger.urls import pooler_problem

__all__ = ["BatchingSqliteSaver", "async_postgres_saver", "postgres_saver"]

_SHARED: ContextVar[tuple[Any, Any] | None] = ContextVar("turnkit_batch", default=None)
"""The async saver and cursor of the ``abatched()`` block the running task is in."""


@contextmanager
def _one_batch(batch: threading.local, opened: Callable[[], Any]) -> Iterator[None]:
    """Open a cursor (``opened``) that the saver's calls in this thread share until the end."""
    with opened() as cur:
        batch.cursor = cur
        try:
            yield
        finally:
            batch.cursor = None


@contextmanager
def _shared_or(batch: threading.local, opened: Callable[[], Any]) -> Iterator[Any]:
    """The batch's cursor inside ``batched()``; else a cursor of the saver's own (``opened``)."""
    shared = getattr(batch, "cursor", None)
    if shared is not None:
        yield shared
        return
    with opened() as cur:
        yield cur


class BatchingSqliteSaver(SqliteSaver):
    """``SqliteSaver`` whose calls inside ``batched()`` share one transaction (one commit)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._batch = threading.local()

    def batched(self) -> AbstractContextManager[None]:
        """Run the saver calls made inside in one transaction, committed at the end."""
        opened = super().cursor
        return _one_batch(self._batch, lambda: opened(True))

    def cursor(self, transaction: bool = True) -> AbstractContextManager[Any]:  # type: ignore[override]
        opened = super().cursor
        return _shared_or(self._batch, lambda: opened(transaction))


@contextmanager
def _told(pool: Any, opened: AbstractContextManager[Any]) -> Iterator[Any]:
    """``opened``'s cursor; a prepared statement a pooler broke (the URL not saying
    ``pooler=transaction``) becomes the ``StorageError`` that says to add it."""
    try:
        with opened as cur:
            yield cur
    except Exception as exc:  # raised in the block, or when the pipeline syncs at its end
        problem = pooler_problem(getattr(pool, "conninfo", None), exc)
        if problem is None:
            raise
        raise problem from exc


def postgres_saver(pool: Any) -> Any:
    """A ``PostgresSaver`` on ``pool`` whose calls inside ``batched()`` share one pipeline."""
    return _postgres_class()(pool)


@functools.cache
def _postgres_class() -> type[Any]:
    """The class, made once when first needed (psycopg is the ``postgres`` extra's)."""
    from langgraph.checkpoint.postgres import PostgresSaver

    class BatchingPostgresSaver(PostgresSaver):
        """``PostgresSaver`` whose calls inside ``batched()`` share one pipeline: one round trip."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._batch = threading.local()

        def batched(self) -> AbstractContextManager[None]:
            """Run the saver calls made inside in one pipeline, synced (committed) at the end."""
            opened = super()._cursor
            return _one_batch(self._batch, lambda: opened(pipeline=True))

        def _cursor(self, *, pipeline: bool = False) -> AbstractContextManager[Any]:  # type: ignore[override]
            opened = super()._cursor
            shared = _shared_or(self._batch, lambda: opened(pipeline=pipeline))
            return _told(self.conn, shared)

    return BatchingPostgresSaver


def async_postgres_saver(pool: Any) -> Any:
    """An ``AsyncPostgresSaver`` on ``pool`` whose calls inside ``abatched()`` share a pipeline."""
    return _async_postgres_class()(pool)


@functools.cache
def _async_postgres_class() -> type[Any]:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    class AsyncBatchingPostgresSaver(AsyncPostgresSaver):
        """``AsyncPostgresSaver`` whose calls inside ``abatched()`` share one pipeline."""

        @asynccontextmanager
        async def abatched(self) -> AsyncIterator[None]:
            """Run the saver calls the task makes inside in one pipeline, synced at the end."""
            async with super()._cursor(pipeline=True) as cur:
                token = _SHARED.set((self, cur))
                try:
                    yield
                finally:
                    _SHARED.reset(token)

        @asynccontextmanager
        async def _cursor(self, *, pipeline: bool = False) -> AsyncIterator[Any]:
            shared = _SHARED.get()
            if shared is not None and shared[0] is self:
                yield shared[1]
                return
            try:
                async with super()._cursor(pipeline=pipeline) as cur:
                    yield cur
            except Exception as exc:  # say so when a pooler broke a prepared statement
                problem = pooler_problem(getattr(self.conn, "conninfo", None), exc)
                if problem is None:
                    raise
                raise problem from exc

    return AsyncBatchingPostgresSaver
