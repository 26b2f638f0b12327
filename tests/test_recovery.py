"""A round that stopped before its answers were given (a timeout, a cancel, a crash, a new message
sent meanwhile) is put right at the next turn's start, and a held write is never asked twice."""

from __future__ import annotations

import asyncio
import json

import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from _shop import prices
from turnkit import Caller
from turnkit.graph import TurnContext, build_turn_graph
from turnkit.testing import ScriptedModel
from turnkit.turn.keys import idempotency_key  # internal: the key a turn gives a call

ALICE = TurnContext(caller=Caller.session("alice"))
CONFIG = {"configurable": {"thread_id": "stopped"}}
WRITE = {"tool_calls": [{"name": "shop_set_prices", "args": prices("TEA-0001"), "id": "w1"}]}


@pytest.fixture
def graph_on(executor):
    executor.ledger.set_setting("api_session_write_modules", ["shop"])

    def build(*steps):
        return build_turn_graph(executor, ScriptedModel(list(steps)), checkpointer=InMemorySaver())

    return build


def run(graph, request, mode, **options):
    if mode == "invoke":
        return graph.invoke(request, CONFIG, context=ALICE, **options)
    return asyncio.run(graph.ainvoke(request, CONFIG, context=ALICE, **options))


def answer_to(graph, call_id):
    messages = graph.get_state(CONFIG).values["messages"]
    (found,) = [m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == call_id]
    return json.loads(found.content)


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_a_round_stopped_after_execute_holds_its_write_again_not_twice(
    graph_on, executor, shop, mode
):
    graph = graph_on(WRITE, "Noted.", "Done.")
    run(graph, {"messages": [HumanMessage("change it")]}, mode, interrupt_after=["execute"])
    (first,) = executor.pending()  # held by execute; the round stopped before fit_results
    run(graph, {"messages": [HumanMessage("anything else?")]}, mode)
    assert answer_to(graph, "w1") == {
        "status": "confirmation_required", "confirmation_id": first.id}  # fmt: skip
    held = graph.get_state(CONFIG).values["held"]
    assert [h["confirmation_id"] for h in held] == [first.id]  # held again, on the same one
    assert [c.id for c in executor.pending()] == [first.id]
    executor.confirm(first.id, Caller.session("alice"), "approve")
    run(graph, {"messages": [HumanMessage("and now?")]}, mode)
    assert len(shop.writes()) == 1
    assert answer_to(graph, "w1")["status"] == "ok"


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_a_write_recorded_before_the_process_died_is_held_again_from_the_ledger(
    graph_on, executor, shop, mode
):
    graph = graph_on(WRITE, "Noted.")
    run(graph, {"messages": [HumanMessage("change it")]}, mode, interrupt_before=["execute"])
    # the executor answered (and held the write) but the process died before execute's
    # checkpoint: the ledger has the answer under the call's key, the thread does not
    (call,) = graph.get_state(CONFIG).values["calls"]
    key = idempotency_key("stopped", call)
    held = executor.execute(Caller.session("alice"), "shop.set_prices", call["args"],
                            {"idempotency_key": key})  # fmt: skip
    assert held["status"] == "confirmation_required"
    run(graph, {"messages": [HumanMessage("and?")]}, mode)
    assert answer_to(graph, "w1")["confirmation_id"] == held["confirmation_id"]
    (again,) = graph.get_state(CONFIG).values["held"]
    assert again["confirmation_id"] == held["confirmation_id"]
    assert again["tool"] == "shop.set_prices"
    assert len(executor.pending()) == 1


def test_a_recorded_write_decided_meanwhile_is_given_its_outcome(graph_on, executor, shop):
    graph = graph_on(WRITE, "Noted.")
    run(graph, {"messages": [HumanMessage("change it")]}, "invoke", interrupt_after=["execute"])
    (first,) = executor.pending()
    executor.confirm(first.id, Caller.session("alice"), "approve")
    done = run(graph, {"messages": [HumanMessage("did it?")]}, "invoke")
    assert "__interrupt__" not in done
    assert answer_to(graph, "w1")["status"] == "ok"
    assert len(shop.writes()) == 1


def test_a_read_stopped_mid_round_is_answered_interrupted(graph_on, executor):
    read = {"tool_calls": [{"name": "shop_list_products", "args": {}, "id": "r1"}]}
    graph = graph_on(read, "Noted.")
    run(graph, {"messages": [HumanMessage("list")]}, "invoke", interrupt_before=["execute"])
    run(graph, {"messages": [HumanMessage("well?")]}, "invoke")
    assert answer_to(graph, "r1")["error"]["code"] == "in_progress"
    messages = graph.get_state(CONFIG).values["messages"]
    assert [m.type for m in messages] == ["human", "ai", "tool", "human", "ai"]
