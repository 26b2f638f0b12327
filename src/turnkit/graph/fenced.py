"""``FencedSaver``: a LangGraph checkpointer that writes a run's checkpoints only while the run
still holds its thread's lease (``turnkit.turn.leases``).

Two processes running one thread at once would fork its checkpoint chain: LangGraph's savers have
no single-writer guarantee (langgraph issue 8796). The lease keeps a second run out; this wrapper
stops a first one that lost its lease (stalled past the expiry, or its database session ended)
before it writes again. Every other call goes straight to the saver it wraps;
``tests/test_fenced_saver.py`` fails when LangGraph adds a method this class does not pass on.
"""

from __future__ import annotations

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
from turnkit.turn.leases import Leases, afence_run, fence_run

__all__ = ["FencedSaver", "durable", "fenced"]

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
        if name in ("saver", "leases"):  # not set yet (copying): no endless recursion
            raise AttributeError(name)
        return getattr(self.saver, name)

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> FencedSaver:
        saver = self.saver.with_allowlist(extra_allowlist)
        return self if saver is self.saver else FencedSaver(saver, self.leases)

    # --- writes: fenced ---------------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        fence_run(config)
        return self.saver.put(config, checkpoint, metadata, new_versions)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        fence_run(config)
        self.saver.put_writes(config, writes, task_id, task_path)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        await afence_run(config)
        return await self.saver.aput(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await afence_run(config)
        await self.saver.aput_writes(config, writes, task_id, task_path)

    # --- everything else: passed on ---------------------------------------------------------

    def get(self, config: RunnableConfig) -> Checkpoint | None:
        return self.saver.get(config)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self.saver.get_tuple(config)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        return self.saver.list(config, filter=filter, before=before, limit=limit)

    def delete_thread(self, thread_id: str) -> None:
        self.saver.delete_thread(thread_id)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self.saver.delete_for_runs(run_ids)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self.saver.copy_thread(source_thread_id, target_thread_id)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self.saver.prune(thread_ids, strategy=strategy)

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, Any]:
        return self.saver.get_delta_channel_history(config=config, channels=channels)

    def get_next_version(self, current: Any, channel: None) -> Any:
        return self.saver.get_next_version(current, channel)

    async def aget(self, config: RunnableConfig) -> Checkpoint | None:
        return await self.saver.aget(config)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self.saver.aget_tuple(config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        async for item in self.saver.alist(config, filter=filter, before=before, limit=limit):
            yield item

    async def adelete_thread(self, thread_id: str) -> None:
        await self.saver.adelete_thread(thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self.saver.adelete_for_runs(run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self.saver.acopy_thread(source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await self.saver.aprune(thread_ids, strategy=strategy)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, Any]:
        return await self.saver.aget_delta_channel_history(config=config, channels=channels)

    def __repr__(self) -> str:
        return f"FencedSaver({self.saver!r})"
