"""``TurnGraph``: the compiled turn graph, one writer per thread.

A run on a checkpointed thread takes the thread's lease before it reads the thread and gives it
back when it ends (finished, paused at an interrupt, failed or cancelled); a run that finds the
thread busy raises ``ThreadBusy`` at once, or waits up to its ``busy_timeout``. Its checkpoint
writes go through ``FencedSaver`` and stop if the lease is lost. ``invoke``, ``ainvoke``,
``stream`` and ``astream`` each take the lease (``invoke`` around the stream it runs, which then
finds it in its config); so do state updates.

A checkpointer attached later (``langgraph dev`` copies the graph with its own) is fenced too:
LangGraph's ``copy`` builds a ``TurnGraph`` again, and ``__init__`` wraps it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import StateUpdate

from turnkit._compat import CONFIG_KEY_DURABILITY
from turnkit.ledger.leases import Lease
from turnkit.threads.fenced import FencedSaver, fenced
from turnkit.threads.leases import (
    LEASE_KEY,
    Leases,
    agive_back,
    atake,
    defer_saves,
    give_back,
    take,
)

__all__ = ["BUSY_TIMEOUT_KEY", "TurnGraph"]

BUSY_TIMEOUT_KEY = "busy_timeout"
"""The run config's key (in ``configurable``) for how long a run waits for a busy thread."""


class TurnGraph(CompiledStateGraph[Any, Any, Any, Any]):
    """A compiled turn graph whose runs take their thread's lease (built by ``build_turn_graph``;
    use it as any compiled LangGraph graph)."""

    def __init__(
        self,
        *,
        thread_leases: Leases | None = None,
        defers_checkpoints: bool = False,
        **kwargs: Any,
    ) -> None:
        saver = kwargs.get("checkpointer")
        if thread_leases is not None and isinstance(saver, BaseCheckpointSaver):
            kwargs["checkpointer"] = fenced(saver, thread_leases)
        super().__init__(**kwargs)
        self.thread_leases = thread_leases
        self.defers_checkpoints = defers_checkpoints
        """Whether a run's checkpoints may wait until it acts: only for a graph whose nodes save
        them first (``settle_run``), as the turn graph's do, and only with ``sync`` durability
        (LangGraph then hands each step's checkpoint over before the next step starts, so what
        asked for an act is still deferred, and so saved, when the act settles); any other
        graph's are saved at each step (their task writes still wait for the checkpoint that
        follows them)."""

    def _thread(self, config: RunnableConfig | None) -> tuple[Leases, str, float] | None:
        """The leases, thread and wait of a run with ``config``; None when it needs no lease."""
        saver = self.checkpointer
        if not isinstance(saver, FencedSaver):
            return None
        configurable = {**(self.config or {}).get("configurable", {})}
        configurable.update((config or {}).get("configurable") or {})
        thread_id = configurable.get("thread_id")
        if thread_id is None or LEASE_KEY in configurable:  # no thread; or a nested call
            return None
        wait = configurable.get(BUSY_TIMEOUT_KEY) or 0.0
        if isinstance(wait, bool) or not isinstance(wait, int | float) or not 0 <= wait < 1e9:
            raise ValueError(
                f"busy_timeout must be a number of seconds (0 or more), got {wait!r}:"
                ' configurable={"thread_id": ..., "busy_timeout": 30}'
            )
        return saver.leases, str(thread_id), float(wait)

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        thread = self._thread(config)
        if thread is None:
            return super().invoke(input, config, **kwargs)
        lease = take(*thread)  # kept around the whole call: its stream needs no wrapper
        try:
            return super().invoke(input, self._with(config, lease, kwargs), **kwargs)
        finally:
            self._end(lease)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        thread = self._thread(config)
        if thread is None:
            return await super().ainvoke(input, config, **kwargs)
        lease = await atake(*thread)
        try:
            return await super().ainvoke(input, self._with(config, lease, kwargs), **kwargs)
        finally:
            await self._aend(lease)

    def stream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        thread = self._thread(config)
        if thread is None:
            return super().stream(input, config, **kwargs)
        return self._leased_stream(thread, input, config, **kwargs)

    def _leased_stream(
        self, thread: tuple[Leases, str, float], input: Any, config: Any, **kwargs: Any
    ) -> Iterator[Any]:
        lease = take(*thread)
        try:
            yield from super().stream(input, self._with(config, lease, kwargs), **kwargs)
        finally:
            self._end(lease)

    def astream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        thread = self._thread(config)
        if thread is None:
            return super().astream(input, config, **kwargs)
        return self._leased_astream(thread, input, config, **kwargs)

    async def _leased_astream(
        self, thread: tuple[Leases, str, float], input: Any, config: Any, **kwargs: Any
    ) -> AsyncIterator[Any]:
        lease = await atake(*thread)
        try:
            async for chunk in super().astream(input, self._with(config, lease, kwargs), **kwargs):
                yield chunk
        finally:
            await self._aend(lease)

    def _with(self, config: Any, lease: Lease, options: dict[str, Any]) -> RunnableConfig:
        """The run's config with its lease. A run of a graph that may defer checkpoints, with
        ``sync`` durability (``options``' own, else its configs'), defers them in its saver."""
        leased = _with_lease(config, lease)
        saver = self.checkpointer
        if self.defers_checkpoints and isinstance(saver, FencedSaver) and saver.can_defer:
            configurable = {**(self.config or {}).get("configurable", {}), **leased["configurable"]}
            durability = options.get("durability") or configurable.get(CONFIG_KEY_DURABILITY)
            during = options.get("checkpoint_during")  # LangGraph's deprecated spelling of it
            if during is not None and options.get("durability") is None:
                durability = "async" if during else "exit"
            if durability == "sync":
                defer_saves(lease, saver)
        return leased

    def _end(self, lease: Lease) -> None:
        """End a run: write the saves it still defers (``FencedSaver.flush``; if that
        fails, the thread stays as of its last save), then give the lease back."""
        saver = self.checkpointer
        try:
            if isinstance(saver, FencedSaver):
                try:
                    saver.flush(lease.thread_id)
                finally:
                    saver.forget(lease.thread_id)
        finally:
            give_back(lease)

    async def _aend(self, lease: Lease) -> None:
        """Async twin of ``_end``."""
        saver = self.checkpointer
        try:
            if isinstance(saver, FencedSaver):
                try:
                    await saver.aflush(lease.thread_id)
                finally:
                    saver.forget(lease.thread_id)
        finally:
            await agive_back(lease)

    def bulk_update_state(
        self, config: RunnableConfig, supersteps: Sequence[Sequence[StateUpdate]]
    ) -> RunnableConfig:
        thread = self._thread(config)
        if thread is None:
            return super().bulk_update_state(config, supersteps)
        lease = take(*thread)
        try:
            return _without(super().bulk_update_state(_with_lease(config, lease), supersteps))
        finally:
            self._end(lease)

    async def abulk_update_state(
        self, config: RunnableConfig, supersteps: Sequence[Sequence[StateUpdate]]
    ) -> RunnableConfig:
        thread = self._thread(config)
        if thread is None:
            return await super().abulk_update_state(config, supersteps)
        lease = await atake(*thread)
        try:
            return _without(
                await super().abulk_update_state(_with_lease(config, lease), supersteps)
            )
        finally:
            await self._aend(lease)


def _with_lease(config: Any, lease: Lease) -> RunnableConfig:
    config = dict(config or {})
    config["configurable"] = {**(config.get("configurable") or {}), LEASE_KEY: lease}
    return config


def _without(config: RunnableConfig) -> RunnableConfig:
    configurable = dict(config.get("configurable") or {})
    configurable.pop(LEASE_KEY, None)
    return {**config, "configurable": configurable}
