"""The door rules (``test_door_rules.py``) at the doors that resume a paused turn: the turn graph
and the ``create_agent`` middleware. A thread whose write was held by one application and
resumed by another whose registry declares the tool differently, or whose settings in code leave
out the agent's switch, keeps the write pending and asks again with the reason; nothing runs."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from _shop import Shop, prices
from test_door_rules import OtherShop
from turnkit import Caller, Executor, Registry, Settings
from turnkit.graph import TurnContext, build_turn_graph
from turnkit.middleware import TurnkitMiddleware
from turnkit.testing import ScriptedModel

ALICE = TurnContext(caller=Caller.session("alice"))
CONFIG = {"configurable": {"thread_id": "t-doors"}}
ACTS = Settings(api_session_write_modules={"shop"}, handler_timeout=2.0)
WRITE = {"name": "shop_set_prices", "args": prices(), "id": "w1"}


def script() -> ScriptedModel:
    return ScriptedModel([{"tool_calls": [WRITE]}, "Done."])


def executor_of(ledger: Any, rights: Any, module: Any, settings: Settings) -> Executor:
    return Executor(Registry([module]), ledger=ledger, permissions=rights, settings=settings)


def run(graph: Any, request: Any, mode: str) -> dict[str, Any]:
    if mode == "invoke":
        return graph.invoke(request, CONFIG, context=ALICE)
    if mode == "stream":
        for _ in graph.stream(request, CONFIG, context=ALICE, stream_mode="updates"):
            pass
        return graph.get_state(CONFIG).values | {"__interrupt__": _interrupts(graph)}
    return asyncio.run(graph.ainvoke(request, CONFIG, context=ALICE))


def _interrupts(graph: Any) -> list[Any]:
    return [i for task in graph.get_state(CONFIG).tasks for i in task.interrupts]


def asked(result: dict[str, Any]) -> list[dict[str, Any]]:
    (interrupt,) = result["__interrupt__"]
    return interrupt.value["confirmations"]


@pytest.mark.parametrize("mode", ["invoke", "stream", "ainvoke"])
@pytest.mark.parametrize("door", ["other handler", "no switch"])
def test_a_turn_resumed_where_the_write_cannot_run_as_held_asks_again_with_the_reason(
    ledger, rights, shop, tmp_path, mode, door
):
    saver = InMemorySaver()
    holding = executor_of(ledger, rights, Shop(shop.log), ACTS)
    other = OtherShop(tmp_path / "other.log")
    resuming = (
        executor_of(ledger, rights, other, ACTS)
        if door == "other handler"
        else executor_of(ledger, rights, Shop(shop.log), Settings(handler_timeout=2.0))
    )
    try:
        first = build_turn_graph(holding, script(), checkpointer=saver)
        (held,) = asked(run(first, {"messages": [HumanMessage("go")]}, mode))
        cid = held["confirmation_id"]
        second = build_turn_graph(resuming, script(), checkpointer=saver)
        again = run(second, Command(resume={cid: "approve"}), mode)
        (still,) = asked(again)
        assert still["confirmation_id"] == cid
        assert "still pending" in still["problem"]
        word = "differently" if door == "other handler" else "api_session_write_modules"
        assert word in still["problem"]
        assert holding.confirmation(cid).status == "pending"
        assert shop.writes() == []
        assert other.writes() == []
        done = run(first, Command(resume={cid: "approve"}), mode)  # the holding app can
        assert "__interrupt__" not in done or not done["__interrupt__"]
        assert len(shop.writes()) == 1
    finally:
        holding.close()
        resuming.close()


def test_the_middleware_resumed_where_the_write_cannot_run_as_held_asks_again(
    ledger, rights, shop, tmp_path
):
    saver = InMemorySaver()
    holding = executor_of(ledger, rights, Shop(shop.log), ACTS)
    other = OtherShop(tmp_path / "other.log")
    resuming = executor_of(ledger, rights, other, ACTS)

    def agent(executor: Executor, model: Any = None) -> Any:
        middleware = TurnkitMiddleware(executor)
        return create_agent(model or script(), middleware=[middleware], checkpointer=saver)

    try:
        first = agent(holding).invoke({"messages": [HumanMessage("go")]}, CONFIG, context=ALICE)
        (held,) = asked(first)
        cid = held["confirmation_id"]
        again = agent(resuming).invoke(Command(resume={cid: "approve"}), CONFIG, context=ALICE)
        (still,) = asked(again)
        assert "differently" in still["problem"]
        assert holding.confirmation(cid).status == "pending"
        assert other.writes() == []
        assert shop.writes() == []
        finish = agent(holding, ScriptedModel(["Done."]))  # the holding app can
        done = finish.invoke(Command(resume={cid: "approve"}), CONFIG, context=ALICE)
        (outcome,) = [json.loads(m.content) for m in done["messages"] if isinstance(m, ToolMessage)]
        assert outcome["status"] == "ok"
        assert len(shop.writes()) == 1
    finally:
        holding.close()
        resuming.close()
