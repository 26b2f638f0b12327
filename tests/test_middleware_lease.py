"""One writer per thread for a ``create_agent`` agent governed by ``TurnkitMiddleware``:
``with_thread_leases`` gives its graph the turn graph's leases, in every run mode, on SQLite and
on PostgreSQL (a second run on a busy thread is refused; the thread is free again after)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage

from conftest import postgres_url
from turnkit import Caller, Executor, Registry, ThreadBusy, TurnkitMiddleware
from turnkit.graph import TurnContext, with_thread_leases
from turnkit.storage import open_async_storage, open_storage
from turnkit.testing import ScriptedModel
from turnkit.threads.turn_graph import TurnGraph  # internal: the type with_thread_leases returns

ALICE = TurnContext(caller=Caller.session("alice"))
CONFIG = {"configurable": {"thread_id": "agent-thread"}}


@pytest.fixture(params=["sqlite", "postgres"])
def url(request, tmp_path) -> str:
    return str(tmp_path / "agent.sqlite") if request.param == "sqlite" else postgres_url()


def agent_on(storage: Any, model: Any) -> TurnGraph:
    executor = Executor(Registry([]), ledger=storage.ledger)
    agent = create_agent(
        model, middleware=[TurnkitMiddleware(executor)], checkpointer=storage.checkpointer
    )
    return with_thread_leases(agent, storage.ledger)


@pytest.mark.parametrize("mode", ["invoke", "stream", "ainvoke", "astream"])
def test_a_governed_agent_on_a_busy_thread_is_refused_then_runs(url, mode):
    entered, go_on = threading.Event(), threading.Event()

    def waits(messages: Any, tools: Any) -> str:
        entered.set()
        assert go_on.wait(60)
        return "first"

    def hold() -> None:
        with open_storage(url) as storage:
            agent_on(storage, ScriptedModel([waits])).invoke(
                {"messages": [HumanMessage("hold")]}, CONFIG, context=ALICE
            )

    holder = threading.Thread(target=hold)
    holder.start()
    assert entered.wait(60)
    try:
        with pytest.raises(ThreadBusy):
            run(url, mode, ScriptedModel(["never"]))
    finally:
        go_on.set()
        holder.join(60)
    out = run(url, mode, ScriptedModel(["second"]))
    assert [m.content for m in out if m.type == "ai"] == ["first", "second"]


def run(url: str, mode: str, model: Any) -> list[Any]:
    request = {"messages": [HumanMessage("me too")]}
    if mode in ("invoke", "stream"):
        with open_storage(url) as storage:
            agent = agent_on(storage, model)
            if mode == "invoke":
                agent.invoke(request, CONFIG, context=ALICE)
            else:
                for _ in agent.stream(request, CONFIG, context=ALICE):
                    pass
            return list(agent.get_state(CONFIG).values["messages"])

    async def arun() -> list[Any]:
        async with open_async_storage(url) as storage:
            agent = agent_on(storage, model)
            if mode == "ainvoke":
                await agent.ainvoke(request, CONFIG, context=ALICE)
            else:
                async for _ in agent.astream(request, CONFIG, context=ALICE):
                    pass
            return list((await agent.aget_state(CONFIG)).values["messages"])

    return asyncio.run(arun())
