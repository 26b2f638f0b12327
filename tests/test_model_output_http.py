"""The hostile-output rules with ``ChatOpenAI`` over real HTTP: what an OpenAI-compatible server
sends (cut-off argument text, ``finish_reason: length``, huge integers, repeated ids) never runs
when it should not, and the history turnkit sends back is one OpenAI accepts (the test server
refuses tool messages that answer no call)."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from _openai_server import OpenAIServer, call, reply
from _shop import prices
from turnkit import Caller, Executor, Registry, Settings
from turnkit.graph import TurnContext, build_turn_graph

SCOPES = {"shop.products:read", "shop.products:write"}
KEY = TurnContext(caller=Caller.key("key-1", user_id="alice", scopes=SCOPES))
ALICE = TurnContext(caller=Caller.session("alice"))
CONFIG = {"configurable": {"thread_id": "http-1"}}
CUT = '{"prices": [{"sku": "TEA-0001", "price": 35'


def model(server: OpenAIServer, *, streaming: bool = False) -> ChatOpenAI:
    return ChatOpenAI(
        model="test-model",
        base_url=server.url,
        api_key="test",
        use_responses_api=False,
        streaming=streaming,
    )


@pytest.fixture
def graph_for(ledger, shop, rights):
    ledger.set_setting("api_session_write_modules", ["shop"])
    made: list[Executor] = []

    def build(chat_model: ChatOpenAI):
        executor = Executor(Registry([shop]), ledger=ledger, permissions=rights,
                            settings=Settings(handler_timeout=2.0))  # fmt: skip
        made.append(executor)
        return build_turn_graph(executor, chat_model, checkpointer=InMemorySaver())

    yield build
    for executor in made:
        executor.close()


def answers(result) -> list[tuple[str, dict]]:
    return [
        (m.tool_call_id, json.loads(m.content))
        for m in result["messages"]
        if isinstance(m, ToolMessage)
    ]


def run(graph, how: str, request=None, context=KEY):
    request = request or {"messages": [HumanMessage("go")]}
    if how == "invoke":
        return graph.invoke(request, CONFIG, context=context)
    for _ in graph.stream(request, CONFIG, context=context, stream_mode="messages"):
        pass
    return graph.get_state(CONFIG).values


@pytest.mark.parametrize(
    ("how", "streaming"),
    [("invoke", False), ("invoke", True), ("stream-messages", False)],
    ids=["invoke", "invoke-streaming-model", "stream-messages"],
)
def test_cut_off_argument_text_from_a_server_never_runs(server, graph_for, shop, how, streaming):
    server.script(reply(tool_calls=[call("shop_set_prices", CUT)]), "Sorry.")
    result = run(graph_for(model(server, streaming=streaming)), how)
    assert shop.writes() == []
    ((_, answer),) = answers(result)
    assert answer["error"]["code"] == "invalid_input"
    assert result["messages"][-1].content == "Sorry."


@pytest.mark.parametrize("how", ["invoke", "stream-messages"])
def test_a_reply_cut_off_at_length_runs_none_of_its_calls(server, graph_for, shop, how):
    whole = call("shop_set_prices", prices("TEA-0001"))
    server.script(reply(tool_calls=[whole], finish_reason="length"), "Sorry.")
    result = run(graph_for(model(server)), how)
    assert shop.writes() == []
    ((_, answer),) = answers(result)
    assert "cut off" in answer["error"]["message"]


@pytest.mark.parametrize("how", ["invoke", "stream-messages"])
def test_a_huge_integer_from_a_server_is_answered_and_the_turn_goes_on(server, graph_for, how):
    huge = '{"limit": 1000000000000000000000000000000}'
    server.script(reply(tool_calls=[call("shop_list_products", huge)]), "Sorry.")
    result = run(graph_for(model(server)), how)
    ((_, answer),) = answers(result)
    assert "outside the 64-bit range" in answer["error"]["message"]
    assert result["messages"][-1].content == "Sorry."
    sent_back = server.requests[-1]["messages"][1]
    assert json.loads(sent_back["tool_calls"][0]["function"]["arguments"]) == {"limit": 10**30}


@pytest.mark.parametrize("how", ["invoke", "stream-messages"])
def test_repeated_ids_from_a_server_hold_one_write_and_keep_the_history_valid(
    server, graph_for, shop, how
):
    first = call("shop_set_prices", prices("TEA-0001"), id="call_0")
    second = call("shop_set_prices", prices("TEA-0002"), id="call_0")
    server.script(reply(tool_calls=[first, second]), "Done.")
    graph = graph_for(model(server))
    paused = run(graph, how, context=ALICE)
    (interrupt,) = graph.get_state(CONFIG).interrupts
    (held,) = interrupt.value["confirmations"]
    assert [cid for cid, _ in answers(paused)] == ["call_0", "call_0-2"]
    run(graph, how, Command(resume={held["confirmation_id"]: "approve"}), context=ALICE)
    assert [w["input"] for w in shop.writes()] == [prices("TEA-0001")]
    assistant = server.requests[-1]["messages"][1]
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_0", "call_0-2"]
