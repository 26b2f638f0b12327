"""One turn, run the way each kind of user runs it: every run mode, every checkpointer.

``RUN_MODES``: ``invoke``; ``stream`` with the ``updates``, ``values`` and ``messages`` modes;
``ainvoke``; ``astream``. What LangChain does differs between them (a streamed model reply is
merged from chunks; an invoked one is parsed whole), so a behaviour that matters is checked in each.

``Turns`` builds the graph afresh for every call, as a new process would: on ``memory`` one
``InMemorySaver`` is kept; on ``sqlite`` and ``postgres`` the storage is opened again from its URL
(the sync savers for sync modes, the async ones for async modes). ``strict_checkpoints`` makes every
saver use LangGraph's strict msgpack serializer (``LANGGRAPH_STRICT_MSGPACK=true``); the ``turns``
fixture of ``conftest.py`` gives a ``Turns`` for each mode and backend.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver

from turnkit import Executor
from turnkit.graph import TurnContext, build_turn_graph
from turnkit.storage import open_async_storage, open_storage

RUN_MODES = ("invoke", "stream-updates", "stream-values", "stream-messages", "ainvoke", "astream")
SYNC_MODES = RUN_MODES[:4]


@dataclass
class Outcome:
    """What a call left: the thread's messages, and the interrupts it waits on."""

    messages: list[Any]
    interrupts: list[Any]
    values: dict[str, Any] = field(default_factory=dict)

    @property
    def confirmations(self) -> list[dict[str, Any]]:
        """The held calls the interrupt asks about (none when the turn is not paused)."""
        return [entry for i in self.interrupts for entry in i.value["confirmations"]]


@dataclass
class Turns:
    """Runs turns on one thread of a backend, in one mode, with a graph built per call."""

    backend: str
    """``memory``, or a storage URL (a SQLite file or ``postgresql://...``)."""
    mode: str
    executor: Callable[[Any], Executor]
    """Makes the executor on a ledger (the storage's own on SQLite / PostgreSQL)."""
    ledger: Any = None
    """The ledger of the ``memory`` backend (the executor's for every call)."""
    thread: str = "thread-1"
    checks: Any = None
    """An executor on the same ledger, for the test's own look at it."""
    _memory: InMemorySaver | None = None

    def send(self, model: Any, request: Any, context: TurnContext) -> Outcome:
        """Run ``request`` (input or ``Command``) on the thread; return what it left."""
        if self.mode in SYNC_MODES:
            return self._sync(model, request, context)
        return asyncio.run(self._async(model, request, context))

    def _config(self) -> dict[str, Any]:
        return {"configurable": {"thread_id": self.thread}}

    def _sync(self, model: Any, request: Any, context: TurnContext) -> Outcome:
        if self.backend == "memory":
            self._memory = self._memory or InMemorySaver()
            graph = build_turn_graph(self.executor(self.ledger), model, checkpointer=self._memory)
            return self._run(graph, request, context)
        with open_storage(self.backend) as storage:
            graph = build_turn_graph(
                self.executor(storage.ledger), model, checkpointer=storage.checkpointer
            )
            return self._run(graph, request, context)

    def _run(self, graph: Any, request: Any, context: TurnContext) -> Outcome:
        config = self._config()
        if self.mode == "invoke":
            graph.invoke(request, config, context=context)
        else:
            kind = self.mode.removeprefix("stream-")
            for _ in graph.stream(request, config, context=context, stream_mode=kind):
                pass
        state = graph.get_state(config)
        return Outcome(list(state.values.get("messages", [])), list(state.interrupts), state.values)

    async def _async(self, model: Any, request: Any, context: TurnContext) -> Outcome:
        if self.backend == "memory":
            self._memory = self._memory or InMemorySaver()
            graph = build_turn_graph(self.executor(self.ledger), model, checkpointer=self._memory)
            return await self._arun(graph, request, context)
        async with open_async_storage(self.backend) as storage:
            graph = build_turn_graph(
                self.executor(storage.ledger), model, checkpointer=storage.checkpointer
            )
            return await self._arun(graph, request, context)

    async def _arun(self, graph: Any, request: Any, context: TurnContext) -> Outcome:
        config = self._config()
        if self.mode == "ainvoke":
            await graph.ainvoke(request, config, context=context)
        else:
            async for _ in graph.astream(request, config, context=context, stream_mode="updates"):
                pass
        state = await graph.aget_state(config)
        return Outcome(list(state.values.get("messages", [])), list(state.interrupts), state.values)
