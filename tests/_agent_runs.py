"""A ``create_agent`` agent governed by ``TurnkitMiddleware``, run the way each kind of user runs
it: ``invoke``, ``stream``, ``ainvoke``, ``astream``, on memory, SQLite and PostgreSQL savers.

``AgentRuns`` builds the agent afresh for every call, as a new process would: on ``memory`` one
``InMemorySaver`` is kept; on ``sqlite`` and ``postgres`` the storage is opened again from its URL
(the sync saver for sync modes, the async one for async modes).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver

from turnkit import Executor
from turnkit.middleware import TurnkitMiddleware
from turnkit.storage import open_async_storage, open_storage

AGENT_MODES = ("invoke", "stream", "ainvoke", "astream")


@dataclass
class Outcome:
    """What a call left: the thread's messages and the interrupts it waits on."""

    messages: list[Any]
    interrupts: list[Any]

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The interrupt's action requests (LangChain's HITL shape)."""
        return [r for i in self.interrupts for r in i.value["action_requests"]]


@dataclass
class AgentRuns:
    """Runs an agent on one thread of a backend, in one mode, built per call."""

    backend: str
    mode: str
    executor: Callable[[Any], Executor]
    ledger: Any = None
    thread: str = "agent-thread"
    tools: list[Any] = field(default_factory=list)
    """The agent's own tools, beside the registry's."""
    _memory: InMemorySaver | None = None

    def send(self, model: Any, request: Any, context: Any) -> Outcome:
        if self.mode in ("invoke", "stream"):
            return self._sync(model, request, context)
        return asyncio.run(self._async(model, request, context))

    def _agent(self, model: Any, ledger: Any, checkpointer: Any) -> Any:
        middleware = TurnkitMiddleware(self.executor(ledger))
        return create_agent(
            model, tools=self.tools, middleware=[middleware], checkpointer=checkpointer
        )

    def _config(self) -> dict[str, Any]:
        return {"configurable": {"thread_id": self.thread}}

    def _sync(self, model: Any, request: Any, context: Any) -> Outcome:
        if self.backend == "memory":
            self._memory = self._memory or InMemorySaver()
            return self._run(self._agent(model, self.ledger, self._memory), request, context)
        with open_storage(self.backend) as storage:
            agent = self._agent(model, storage.ledger, storage.checkpointer)
            return self._run(agent, request, context)

    def _run(self, agent: Any, request: Any, context: Any) -> Outcome:
        config = self._config()
        if self.mode == "invoke":
            agent.invoke(request, config, context=context)
        else:
            for _ in agent.stream(request, config, context=context, stream_mode="updates"):
                pass
        state = agent.get_state(config)
        return Outcome(list(state.values.get("messages", [])), list(state.interrupts))

    async def _async(self, model: Any, request: Any, context: Any) -> Outcome:
        if self.backend == "memory":
            self._memory = self._memory or InMemorySaver()
            agent = self._agent(model, self.ledger, self._memory)
            return await self._arun(agent, request, context)
        async with open_async_storage(self.backend) as storage:
            agent = self._agent(model, storage.ledger, storage.checkpointer)
            return await self._arun(agent, request, context)

    async def _arun(self, agent: Any, request: Any, context: Any) -> Outcome:
        config = self._config()
        if self.mode == "ainvoke":
            await agent.ainvoke(request, config, context=context)
        else:
            async for _ in agent.astream(request, config, context=context, stream_mode="updates"):
                pass
        state = await agent.aget_state(config)
        return Outcome(list(state.values.get("messages", [])), list(state.interrupts))
