"""``FencedSaver``: a LangGraph checkpointer that writes a run's checkpoints only while the run
still has its thread's lease (``turnkit.threads.leases``).

Two processes running one thread at once would fork its checkpoint chain: LangGraph's savers have
no single-writer guarantee (langgraph issue 8796). The lease keeps a second run out; this wrapper
stops a first one that lost its lease (stalled past the expiry, or its database session ended)
before it writes again. Every other call goes straight to the saver it wraps;
``tests/test_thread_lease.py`` fails when LangGraph adds a method this class does not pass on.

On a saver that can batch (``turnkit.storage``'s SQLite and PostgreSQL savers), a leased run's
saves wait (``deferred.py``) and are written together, in order, in one transaction:

- its task writes wait at least for the checkpoint that follows them (one round trip a step
  instead of two);
- in a turn graph's run with ``sync`` durability (``defer_saves``) the checkpoints of its steps
  wait too, until the run acts on the world: its nodes save what waits before a round of tool
  calls or decisions (``settle_run``), so nothing a run does can outlive the state that asked
  for it, and a step lost in a crash is one that is harmless to run again (listing tools,
  asking the model, checking arguments, fitting answers; a tool call replays its idempotency
  record). A run's input waits only for its first step (one transaction: the message is in
  the thread before the model is asked), and a checkpoint that is no step's (a state update)
  is saved at once;
- writes LangGraph reads back when a run stops (an interrupt, an error, a resume value) are saved
  at once, with everything before them; the run's own reads of its thread save first; and
  whatever still waits when the run ends is saved then (``flush``), before the lease is given
  back.
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

from turnkit.errors import LeaseLost
from turnkit.ledger.leases import Lease, LocalLeases
from turnkit.threads.deferred import Deferred, Save, awrite, next_config, write
from turnkit.threads.leases import Leases, afence_run, deferred_saves, fence_run, own_lease

__all__ = ["DEFER_LIMIT", "FencedSaver", "InProcessSaver", "durable", "fenced"]

DEFER_LIMIT = 64
"""Saves a run defers before a checkpoint is written with them at once (a run that goes
round many times without acting is saved every ~30 steps)."""

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
        return InProcessSaver(saver, _LOCAL.setdefault(saver, LocalLeases()))
    return FencedSaver(saver, leases)


class FencedSaver(BaseCheckpointSaver[Any]):
    """Passes every call to ``saver``; a write carrying a run's lease is made only while the lease
    is still the run's (else ``LeaseLost``). ``leases`` is where runs on this saver take
    theirs."""

    def __init__(self, saver: BaseCheckpointSaver[Any], leases: Leases) -> None:
        self.saver = saver
        self.leases = leases
        self._deferred = Deferred()
        self._begun: weakref.WeakSet[Lease] = weakref.WeakSet()  # runs whose first step is saved

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
        if name in ("saver", "leases", "_deferred", "_begun"):  # unset while copying: no loop
            raise AttributeError(name)
        return getattr(self.saver, name)

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> FencedSaver:
        saver = self.saver.with_allowlist(extra_allowlist)
        if saver is self.saver:
            return self
        clone = type(self)(saver, self.leases)
        clone._deferred, clone._begun = (
            self._deferred,
            self._begun,
        )  # one run, one list of saves
        return clone

    # --- writes: fenced, and deferred while the run may wait ----------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        fence_run(config)
        save: Save = ("put", (config, checkpoint, metadata, new_versions))
        if self._defers(config, "batched", step=metadata):
            if self._deferred.add(_thread_of(config), save) >= DEFER_LIMIT:
                self.flush(_thread_of(config))
            return next_config(config, checkpoint)
        return self._save(_thread_of(config), save)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        fence_run(config)
        save: Save = ("writes", (config, writes, task_id, task_path))
        if self._defers(config, "batched", writes=writes):
            self._deferred.add(_thread_of(config), save)
            return
        self._save(_thread_of(config), save)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        await afence_run(config)
        save: Save = ("put", (config, checkpoint, metadata, new_versions))
        if self._defers(config, "abatched", step=metadata):
            if self._deferred.add(_thread_of(config), save) >= DEFER_LIMIT:
                await self.aflush(_thread_of(config))
            return next_config(config, checkpoint)
        return await self._asave(_thread_of(config), save)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await afence_run(config)
        save: Save = ("writes", (config, writes, task_id, task_path))
        if self._defers(config, "abatched", writes=writes):
            self._deferred.add(_thread_of(config), save)
            return
        await self._asave(_thread_of(config), save)

    @property
    def can_defer(self) -> bool:
        """Whether runs may defer their saves here: the saver writes several in one
        transaction (``batched``/``abatched``: ``turnkit.storage``'s SQLite and PostgreSQL)."""
        return hasattr(self.saver, "batched") or hasattr(self.saver, "abatched")

    def flush(self, thread_id: str) -> None:
        """Write the saves ``thread_id``'s run deferred, in order and in one transaction: before
        the run acts (``turnkit.threads.leases.settle_run``), stops, or ends. When saving fails,
        the saves stay deferred, in order, for the next flush (``forget`` drops them); when the run
        has lost its lease, they are dropped (the thread is another run's now)."""
        saves = self._deferred.take(thread_id)
        if not saves:
            return
        try:
            fence_run(saves[-1][1][0])
            write(self.saver, saves)
        except LeaseLost:
            raise
        except BaseException:
            self._deferred.put_back(thread_id, saves)
            raise

    async def aflush(self, thread_id: str) -> None:
        """``flush`` for an async saver's run."""
        saves = self._deferred.take(thread_id)
        if not saves:
            return
        try:
            await afence_run(saves[-1][1][0])
            await awrite(self.saver, saves)
        except LeaseLost:
            raise
        except BaseException:
            self._deferred.put_back(thread_id, saves)
            raise

    def forget(self, thread_id: str) -> None:
        """Drop the saves ``thread_id``'s run still defers (it ended, and its last flush failed: the
        thread stays as of its last save, as after a crash)."""
        self._deferred.take(thread_id)

    def _defers(
        self,
        config: RunnableConfig,
        batched: str,
        *,
        writes: Sequence[tuple[str, Any]] = (),
        step: CheckpointMetadata | None = None,
    ) -> bool:
        """Whether this save may wait: a leased run's (its end saves it) on a saver that batches,
        not to a channel of LangGraph's own (``__interrupt__``, ``__error__``, ``__resume__``...:
        a stopped run is resumed from those). A checkpoint waits only in a run whose nodes save
        what waits before they act (``defer_saves``: the turn graph's, with ``sync`` durability),
        and only its input or a step's after its first: the first step's is saved at once, with
        the input, so the input is in the thread before anything is asked of the model. Any
        other checkpoint (a state update) is saved at once, with the task writes before it."""
        lease = own_lease(config)
        if lease is None or not hasattr(self.saver, batched):
            return False
        if step is None:
            return not any(channel.startswith("__") for channel, _ in writes)
        source = step.get("source")
        if deferred_saves(lease) is None or source not in ("input", "loop"):
            return False
        if source == "loop" and lease not in self._begun:
            self._begun.add(lease)  # the run's first step: saved now, with its input
            return False
        return True

    def _save(self, thread_id: str, save: Save) -> Any:
        """``save`` now, after the saves the thread's run deferred, in one transaction."""
        saves = self._deferred.take(thread_id)
        try:
            return write(self.saver, [*saves, save])
        except BaseException:
            self._deferred.put_back(thread_id, saves)
            raise

    async def _asave(self, thread_id: str, save: Save) -> Any:
        saves = self._deferred.take(thread_id)
        try:
            return await awrite(self.saver, [*saves, save])
        except BaseException:
            self._deferred.put_back(thread_id, saves)
            raise

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
        self._deferred.take(str(thread_id))
        self.saver.delete_thread(thread_id)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self.saver.delete_for_runs(run_ids)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self.saver.copy_thread(source_thread_id, target_thread_id)  # as saved (another reader)

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
        self._deferred.take(str(thread_id))
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
        await self._aflush_for(config)
        return await self.saver.aget_delta_channel_history(config=config, channels=channels)

    def _flush_for(self, config: RunnableConfig | None) -> None:
        """Before a run's own read of its thread: write what it deferred, so the read sees it.
        (Another reader sees the thread as of its last checkpoint, as it would mid-step.)"""
        if self._deferred and config and own_lease(config) is not None:
            self.flush(_thread_of(config))

    async def _aflush_for(self, config: RunnableConfig | None) -> None:
        if self._deferred and config and own_lease(config) is not None:
            await self.aflush(_thread_of(config))

    def __repr__(self) -> str:
        return f"FencedSaver({self.saver!r})"


class InProcessSaver(FencedSaver):
    """A ``FencedSaver`` for a checkpointer that lives in this process (``InMemorySaver``), its
    leases in this process's memory: no other process can write its threads, and a lease kept in
    memory ends only when its run does, so its writes go straight through (nothing to fence, and
    nothing to batch)."""

    def __init__(self, saver: BaseCheckpointSaver[Any], leases: Leases) -> None:
        super().__init__(saver, leases)
        # the saver's own methods, bound on the instance: no frame (nor coroutine) of ours in
        # between, ~25 calls and objects a turn fewer on the path every step takes
        for name in _STRAIGHT_THROUGH:
            setattr(self, name, getattr(saver, name))


_STRAIGHT_THROUGH = ("put", "put_writes", "aput", "aput_writes", "get_next_version")
"""What an ``InProcessSaver`` passes on as its saver's own (what ``FencedSaver`` fences, and
``get_next_version``, which it passes on unchanged)."""


def _thread_of(config: RunnableConfig) -> str:
    return str((config.get("configurable") or {}).get("thread_id"))
