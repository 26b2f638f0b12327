"""``FencedSaver``: a LangGraph checkpointer that writes a run's checkpoints only while the run
still holds its thread's lease (``turnkit.turn.leases``).

Two processes running one thread at once would fork its checkpoint chain: LangGraph's savers have
no single-writer guarantee (langgraph issue 8796). The lease keeps a second run out; this wrapper
stops a first one that lost its lease (stalled past the expiry, or its database session ended)
before it writes again. Every other call goes straight to the saver it wraps;
``tests/test_fenced_saver.py`` fails when LangGraph adds a method this class does not pass on.

On a saver that can batch (``turnkit.storage``'s SQLite and PostgreSQL savers), a leased run's
task writes wait for the checkpoint that follows them and are saved in its transaction: one round
trip a step instead of two. Writes LangGraph reads back when a run stops (an interrupt, an
error, a resume value) are saved at once, and whatever still waits when the run ends is saved
then (``flush``), before the lease is given back.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import AsyncIterator, Collection, Iterator, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.memory import InMemorySaver

from turnkit.registry.ledger.leases import LocalLeases
from turnkit.turn.leases import Leases, afence_run, fence_run, own_lease

__all__ = ["FencedSaver", "durable", "fenced"]

Writes = tuple[RunnableConfig, Sequence[tuple[str, Any]], str, str]
"""One ``put_writes`` call's arguments: config, writes, task id, task path."""

_LOCAL: weakref.WeakKeyDictionary[BaseCheckpointSaver[Any], LocalLeases] = (
    weakref.WeakKeyDictionary()
)


def durable(saver: Any) -> bool:
    """Whether ``saver`` keeps checkpoints beyond this process (a saver, not ``InMemorySaver``):
    the one test of where a thread's lease must live."""
    return isinstance(saver, BaseCheckpointSaver) and not isinstance(saver, InMemorySaver)


def fenced(saver: BaseCheckpointSaver[Any], leases: Leases) -> FencedSaver:
    """``saver`` fenced by ``leases``; a saver that lives in this process (``InMemorySaver``) is
    fenced by leases in this process's memory instead, one set per saver: no other process can
    write its threads, so no database needs asking."""
    if isinstance(saver, FencedSaver):
        return saver
    if not durable(saver):
        leases = _LOCAL.setdefault(saver, LocalLeases())
    return FencedSaver(saver, leases)


class FencedSaver(BaseCheckpointSaver[Any]):
    """Passes every call to ``saver``; a write carrying a run's lease is made only while the
    lease holds (else ``LeaseLost``). ``leases`` is where runs on this saver take theirs."""

    def __init__(self, saver: BaseCheckpointSaver[Any], leases: Leases) -> None:
        self.saver = saver
        self.leases = leases
        self._held: dict[str, list[Writes]] = {}
        self._held_lock = threading.Lock()

    @property
    def serde(self) -> Any:
        return self.saver.serde

    @serde.setter
    def serde(self, value: Any) -> None:
        self.saver.serde = value

    @property
    def config_specs(self) -> list[Any]:
        return self.saver.config_specs

    def __getattr__(self, name: str) -> Any:  # a saver's own extras (``setup``, ``conn``, ...)
        if name in ("saver", "leases", "_held", "_held_lock"):  # not set yet (copying)
            raise AttributeError(name)  # (no endless recursion)
        return getattr(self.saver, name)

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> FencedSaver:
        saver = self.saver.with_allowlist(extra_allowlist)
        if saver is self.saver:
            return self
        clone = FencedSaver(saver, self.leases)
        clone._held, clone._held_lock = self._held, self._held_lock  # one run, one held list
        return clone

    # --- writes: fenced ---------------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        fence_run(config)
        held = self._take(_thread_of(config))
        if not held:
            return self.saver.put(config, checkpoint, metadata, new_versions)
        with self.saver.batched():  # type: ignore[attr-defined]  # only held when it has one
            for writes in held:
                self.saver.put_writes(*writes)
            return self.saver.put(config, checkpoint, metadata, new_versions)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        fence_run(config)
        call = (config, writes, task_id, task_path)
        thread = _thread_of(config)
        if self._may_hold(config, writes):
            with self._held_lock:
                self._held.setdefault(thread, []).append(call)
            return
        self._write([*self._take(thread), call])

    def flush(self, thread_id: str) -> None:
        """Save the task writes of ``thread_id`` still waiting for a checkpoint (a run that
        ends, or stops at an interrupt, calls this before giving back its lease)."""
        held = self._take(thread_id)
        if held:
            fence_run(held[-1][0])
            self._write(held)

    async def aflush(self, thread_id: str) -> None:
        """``flush`` for an async saver's run."""
        held = self._take(thread_id)
        if held:
            await afence_run(held[-1][0])
            await self._awrite(held)

    def _may_hold(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], batched: str = "batched"
    ) -> bool:
        """Whether these writes may wait for the next checkpoint: a leased run's (its end flushes
        them) on a saver that batches, none to a channel of LangGraph's own (``__interrupt__``,
        ``__error__``, ``__resume__``...: a stopped run is resumed from those)."""
        return (
            hasattr(self.saver, batched)
            and own_lease(config) is not None
            and not any(channel.startswith("__") for channel, _ in writes)
        )

    def _take(self, thread_id: str) -> list[Writes]:
        if not self._held:  # no lock on the common path: a dict's truth is read atomically
            return []
        with self._held_lock:
            return self._held.pop(thread_id, [])

    async def _awrite(self, calls: list[Writes]) -> None:
        if len(calls) == 1 or not hasattr(self.saver, "abatched"):
            for call in calls:
                await self.saver.aput_writes(*call)
            return
        async with self.saver.abatched():
            for call in calls:
                await self.saver.aput_writes(*call)

    def _write(self, calls: list[Writes]) -> None:
        if len(calls) == 1 or not hasattr(self.saver, "batched"):
            for call in calls:
                self.saver.put_writes(*call)
            return
        with self.saver.batched():
            for call in calls:
                self.saver.put_writes(*call)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        await afence_run(config)
        held = self._take(_thread_of(config))
        if not held:
            return await self.saver.aput(config, checkpoint, metadata, new_versions)
        async with self.saver.abatched():  # type: ignore[attr-defined]  # only held when it has one
            for writes in held:
                await self.saver.aput_writes(*writes)
            return await self.saver.aput(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await afence_run(config)
        call = (config, writes, task_id, task_path)
        thread = _thread_of(config)
        if self._may_hold(config, writes, "abatched"):
            with self._held_lock:
                self._held.setdefault(thread, []).append(call)
            return
        await self._awrite([*self._take(thread), call])

    # --- everything else: passed on ---------------------------------------------------------

    def get(self, config: RunnableConfig) -> Checkpoint | None:
        self._flush_for(config)
        return self.saver.get(config)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        self._flush_for(config)
        return self.saver.get_tuple(config)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        self._flush_for(config)
        return self.saver.list(config, filter=filter, before=before, limit=limit)

    def delete_thread(self, thread_id: str) -> None:
        self._take(str(thread_id))
        self.saver.delete_thread(thread_id)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self.saver.delete_for_runs(run_ids)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self.flush(str(source_thread_id))
        self.saver.copy_thread(source_thread_id, target_thread_id)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self.saver.prune(thread_ids, strategy=strategy)

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, Any]:
        self._flush_for(config)
        return self.saver.get_delta_channel_history(config=config, channels=channels)

    def get_next_version(self, current: Any, channel: None) -> Any:
        return self.saver.get_next_version(current, channel)

    async def aget(self, config: RunnableConfig) -> Checkpoint | None:
        await self._aflush_for(config)
        return await self.saver.aget(config)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        await self._aflush_for(config)
        return await self.saver.aget_tuple(config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        await self._aflush_for(config)
        async for item in self.saver.alist(config, filter=filter, before=before, limit=limit):
            yield item

    async def adelete_thread(self, thread_id: str) -> None:
        self._take(str(thread_id))
        await self.saver.adelete_thread(thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self.saver.adelete_for_runs(run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self.aflush(str(source_thread_id))
        await self.saver.acopy_thread(source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await self.saver.aprune(thread_ids, strategy=strategy)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, Any]:
        await self._aflush_for(config)
        return await self.saver.aget_delta_channel_history(config=config, channels=channels)

    def _flush_for(self, config: RunnableConfig | None) -> None:
        """Before a run's own read of its thread: save what it holds back, so the read sees it.
        (Another reader sees the thread as of its last checkpoint, as it would mid-step.)"""
        if self._held and config and own_lease(config) is not None:
            self.flush(_thread_of(config))

    async def _aflush_for(self, config: RunnableConfig | None) -> None:
        if self._held and config and own_lease(config) is not None:
            await self.aflush(_thread_of(config))

    def __repr__(self) -> str:
        return f"FencedSaver({self.saver!r})"


def _thread_of(config: RunnableConfig) -> str:
    return str((config.get("configurable") or {}).get("thread_id"))
