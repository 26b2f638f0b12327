"""The saves a leased run's checkpointer defers, and how they are written: in order, in one
batch (docs/architecture.md §6, "Saves deferred until the run acts"): one transaction for a crash or
a database error (a Python error in the middle may leave its first part committed).

A save is one call LangGraph made to the checkpointer: a checkpoint (``put``) or a task's writes
(``put_writes``). ``FencedSaver`` keeps them per thread, in the order they came, and writes them
together when the run must be durable: before it acts on the world, when it stops, when it
reads its own thread, and when it ends. A save is serialized when it is written, not when it is
deferred: what LangGraph changes in place meanwhile (an input message's id) is in it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Literal, TypeAlias

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
)

__all__ = ["Deferred", "Save", "awrite", "next_config", "write"]

Save: TypeAlias = (
    tuple[Literal["put"], tuple[RunnableConfig, Checkpoint, CheckpointMetadata, ChannelVersions]]
    | tuple[Literal["writes"], tuple[RunnableConfig, Sequence[tuple[str, Any]], str, str]]
)
"""One deferred checkpointer call: ``("put", its arguments)`` or ``("writes", its arguments)``."""


class Deferred:
    """Per thread, the saves that wait to be written, in the order LangGraph made them."""

    def __init__(self) -> None:
        self._saves: dict[str, list[Save]] = {}
        self._lock = threading.Lock()

    def __bool__(self) -> bool:
        return bool(self._saves)  # a dict's truth is read atomically: no lock on the common path

    def add(self, thread_id: str, save: Save) -> int:
        """Defer ``save`` for ``thread_id``; the number of saves deferred for it now."""
        with self._lock:
            saves = self._saves.setdefault(thread_id, [])
            saves.append(save)
            return len(saves)

    def take(self, thread_id: str) -> list[Save]:
        """The saves deferred for ``thread_id``, taken out (no longer deferred)."""
        if not self._saves:
            return []
        with self._lock:
            return self._saves.pop(thread_id, [])

    def put_back(self, thread_id: str, saves: list[Save]) -> None:
        """Defer ``saves`` again, before any deferred since (their write failed: tried later)."""
        if saves:
            with self._lock:
                self._saves[thread_id] = [*saves, *self._saves.get(thread_id, [])]


def next_config(config: RunnableConfig, checkpoint: Checkpoint) -> RunnableConfig:
    """What LangGraph's savers' ``put`` returns for ``checkpoint``: the config that names it.

    A deferred checkpoint is written later, so ``put`` answers this at once (only
    ``update_state`` uses the answer; ``tests/test_deferred_checkpoints.py`` checks it against the
    saved state's config)."""
    configurable = config["configurable"]
    return {
        "configurable": {
            "thread_id": configurable["thread_id"],
            "checkpoint_ns": configurable.get("checkpoint_ns", ""),
            "checkpoint_id": checkpoint["id"],
        }
    }


def write(saver: BaseCheckpointSaver[Any], saves: list[Save]) -> Any:
    """Make the calls of ``saves`` on ``saver``, in order and, when it can batch and there are
    several, in one transaction; the answer of the last."""
    if len(saves) == 1 or not hasattr(saver, "batched"):
        return _each(saver, saves)
    with saver.batched():
        return _each(saver, saves)


async def awrite(saver: BaseCheckpointSaver[Any], saves: list[Save]) -> Any:
    """``write`` for an async saver."""
    if len(saves) == 1 or not hasattr(saver, "abatched"):
        return await _aeach(saver, saves)
    async with saver.abatched():
        return await _aeach(saver, saves)


def _each(saver: BaseCheckpointSaver[Any], saves: list[Save]) -> Any:
    answer = None
    for kind, args in saves:
        if kind == "put":
            answer = saver.put(*args)
        else:
            saver.put_writes(*args)
            answer = None
    return answer


async def _aeach(saver: BaseCheckpointSaver[Any], saves: list[Save]) -> Any:
    answer = None
    for kind, args in saves:
        if kind == "put":
            answer = await saver.aput(*args)
        else:
            await saver.aput_writes(*args)
            answer = None
    return answer
