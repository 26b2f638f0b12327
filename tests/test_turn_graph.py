"""Full turns on a scripted model: reads run, writes wait at one interrupt, decisions apply once."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from _shop import prices
from turnkit import Caller, Decision, Executor, MissingCallerError, Registry, ResumeError, Settings
from turnkit.graph import TurnContext, build_turn_graph
from turnkit.testing import ScriptedModel
from turnkit.turn.keys import idempotency_key  # internal: the key a turn gives a call

CONFIG = {"configurable": {"thread_id": "thread-1"}}
ALICE = TurnContext(caller=Caller.session("alice"))


def call(name: str, **args) -> dict:
    return {"name": name, "args": args}


def set_prices(*skus: str, price: float = 5.0) -> dict:
    return {"name": "shop_set_prices", "args": prices(*skus, price=price)}


@pytest.fixture
def turn(executor):
    """Build a graph on a script; the agent may act in the shop."""
    executor.ledger.set_setting("api_session_write_modules", ["shop"])

    def make(*steps, **options):
        model = ScriptedModel(list(steps))
        graph = build_turn_graph(executor, model, checkpointer=InMemorySaver(), **options)
        return graph, model

    return make


def start(graph, text="change the price", context=ALICE, config=CONFIG):
    return graph.invoke({"messages": [HumanMessage(text)]}, config, context=context)


def resume(graph, decisions, context=ALICE, config=CONFIG):
    return graph.invoke(Command(resume=decisions), config, context=context)


def confirmations(result) -> list[dict]:
    (interrupt,) = result["__interrupt__"]
    assert interrupt.value["version"] == 1
    assert interrupt.value["type"] == "turnkit.confirmations"
    return interrupt.value["confirmations"]


def tool_results(messages) -> dict[str, dict]:
    return {m.tool_call_id: json.loads(m.content) for m in messages if isinstance(m, ToolMessage)}


def test_a_model_that_answers_directly_ends_the_turn(turn):
    graph, model = turn("Hello!")
    result = start(graph, "hi")
    assert result["messages"][-1].content == "Hello!"
    assert "__interrupt__" not in result
    model.assert_done()


def test_the_model_is_shown_only_the_tools_the_caller_may_use(turn, executor):
    executor.ledger.set_setting("api_session_write_modules", [])
    graph, model = turn("ok")
    start(graph)
    names = [t["function"]["name"] for t in model.calls[0]["tools"]]
    assert names == ["shop_list_products"]
    parameters = model.calls[0]["tools"][0]["function"]["parameters"]
    assert not {"dry_run", "confirm_token", "idempotency_key"} & set(parameters["properties"])


def test_read_runs_write_waits_and_approval_runs_it_once(turn, shop):
    graph, model = turn(
        {"tool_calls": [call("shop_list_products", limit=1), set_prices("TEA-0001")]},
        "Done.",
    )
    first = start(graph)
    (held,) = confirmations(first)
    assert held["tool"] == "shop.set_prices"
    assert held["arguments"] == prices("TEA-0001")
    assert held["expires_at"].endswith("Z")
    assert shop.writes() == []
    results = tool_results(first["messages"])
    assert results[held["tool_call_id"]] == {
        "status": "confirmation_required",
        "confirmation_id": held["confirmation_id"],
    }
    held_message_id = next(
        m.id for m in first["messages"] if getattr(m, "tool_call_id", None) == held["tool_call_id"]
    )

    final = resume(graph, {held["confirmation_id"]: "approve"})
    assert len(shop.writes()) == 1
    assert final["messages"][-1].content == "Done."
    replaced = next(m for m in final["messages"] if m.id == held_message_id)
    assert json.loads(replaced.content) == {
        "executed": True,
        "status": "ok",
        "result": {"updated": 1},
    }
    seen = tool_results(model.calls[-1]["messages"])
    assert seen[held["tool_call_id"]]["result"] == {"updated": 1}
    assert len([m for m in final["messages"] if isinstance(m, ToolMessage)]) == 2
    model.assert_done()


def test_reject_runs_nothing_and_the_model_sees_why(turn, shop):
    graph, model = turn({"tool_calls": [set_prices("TEA-0001")]}, "Understood.")
    (held,) = confirmations(start(graph))
    final = resume(graph, {held["confirmation_id"]: {"action": "reject", "message": "too low"}})
    assert shop.writes() == []
    seen = tool_results(model.calls[-1]["messages"])[held["tool_call_id"]]
    assert seen == {"executed": False, "status": "rejected", "message": "too low"}
    assert final["messages"][-1].content == "Understood."


def test_edit_runs_the_edited_arguments(turn, shop):
    graph, _ = turn({"tool_calls": [set_prices("TEA-0001", price=1.0)]}, "Edited.")
    (held,) = confirmations(start(graph))
    edit = {"action": "edit", "arguments": prices("TEA-0001", price=7.5)}
    resume(graph, {held["confirmation_id"]: edit})
    assert [w["input"] for w in shop.writes()] == [prices("TEA-0001", price=7.5)]


def test_an_invalid_edit_is_asked_again_with_the_reason(turn, shop):
    graph, _ = turn({"tool_calls": [set_prices("TEA-0001")]}, "Done.")
    (held,) = confirmations(start(graph))
    again = resume(graph, {held["confirmation_id"]: {"action": "edit", "arguments": {"x": 1}}})
    (asked,) = confirmations(again)
    assert asked["confirmation_id"] == held["confirmation_id"]
    assert "the edit was not applied" in asked["problem"]
    resume(graph, {held["confirmation_id"]: "approve"})
    assert len(shop.writes()) == 1


def test_two_parallel_held_writes_make_one_interrupt_and_each_applies_once(turn, shop):
    graph, model = turn(
        {"tool_calls": [set_prices("TEA-0001"), call("shop_delete_product", sku="TEA-0002")]},
        "Both handled.",
    )
    asked = confirmations(start(graph))
    assert sorted(c["tool"] for c in asked) == ["shop.delete_product", "shop.set_prices"]
    by_tool = {c["tool"]: c["confirmation_id"] for c in asked}
    resume(graph, {by_tool["shop.set_prices"]: "approve", by_tool["shop.delete_product"]: "reject"})
    assert [w["tool"] for w in shop.writes()] == ["set_prices"]
    seen = tool_results(model.calls[-1]["messages"])
    assert sorted(v.get("status") for v in seen.values()) == ["ok", "rejected"]
    model.assert_done()


def test_a_missing_decision_keeps_the_call_held_and_asks_again(turn, shop):
    graph, _ = turn(
        {"tool_calls": [set_prices("TEA-0001"), call("shop_delete_product", sku="TEA-0002")]},
        "Both handled.",
    )
    by_tool = {c["tool"]: c["confirmation_id"] for c in confirmations(start(graph))}
    again = resume(graph, {by_tool["shop.set_prices"]: "approve"})
    assert [c["tool"] for c in confirmations(again)] == ["shop.delete_product"]
    assert len(shop.writes()) == 1
    final = resume(graph, {by_tool["shop.delete_product"]: "approve"})
    assert [w["tool"] for w in shop.writes()] == ["set_prices", "delete_product"]
    assert final["messages"][-1].content == "Both handled."


@pytest.mark.parametrize(
    "decision",
    [
        "maybe",
        {"action": "approve", "extra": 1},
        {"action": "edit"},
        {"action": "reject", "message": 5},
    ],
)
def test_a_malformed_decision_is_refused_and_nothing_is_applied(turn, shop, decision):
    graph, _ = turn({"tool_calls": [set_prices("TEA-0001")]}, "Done.")
    (held,) = confirmations(start(graph))
    with pytest.raises(ResumeError, match="nothing was decided") as refused:
        resume(graph, {held["confirmation_id"]: decision})
    assert held["confirmation_id"] in str(refused.value)
    assert "'approve' | 'reject'" in str(refused.value)
    assert refused.value.held == (held["confirmation_id"],)
    assert shop.writes() == []
    resume(graph, {held["confirmation_id"]: "approve"})  # the thread still answers
    assert len(shop.writes()) == 1


def test_an_unknown_confirmation_id_is_refused_and_nothing_is_applied(turn, shop):
    graph, _ = turn({"tool_calls": [set_prices("TEA-0001")]}, "Done.")
    (held,) = confirmations(start(graph))
    with pytest.raises(ResumeError, match="are not confirmations held in this thread"):
        resume(graph, {"not-a-held-id": "approve", held["confirmation_id"]: "approve"})
    assert shop.writes() == []
    resume(graph, {held["confirmation_id"]: "approve"})
    assert len(shop.writes()) == 1


def test_a_decision_taken_out_of_band_is_honoured(turn, executor, shop):
    graph, model = turn({"tool_calls": [set_prices("TEA-0001")]}, "Done.")
    (held,) = confirmations(start(graph))
    executor.confirm(held["confirmation_id"], Caller.session("alice"), Decision.approve())
    final = resume(graph, {})
    assert len(shop.writes()) == 1
    assert tool_results(model.calls[-1]["messages"])[held["tool_call_id"]]["status"] == "ok"
    assert final["messages"][-1].content == "Done."


def test_a_new_message_instead_of_a_resume_keeps_the_write_pending_and_reconciles_later(
    turn, executor, shop
):
    graph, model = turn({"tool_calls": [set_prices("TEA-0001")]}, "Okay, something else.", "Noted.")
    (held,) = confirmations(start(graph))
    start(graph, "never mind, tell me something else")
    assert shop.writes() == []
    assert [c.id for c in executor.pending()] == [held["confirmation_id"]]
    executor.confirm(held["confirmation_id"], Caller.session("alice"), "approve")
    final = start(graph, "what happened?")
    assert len(shop.writes()) == 1
    assert tool_results(final["messages"])[held["tool_call_id"]]["status"] == "ok"
    assert "held" not in final or final["held"] == []
    model.assert_done()


def test_a_hostile_model_gets_an_answer_for_every_call_and_nothing_unauthorised_runs(
    turn, executor, shop
):
    executor.ledger.set_setting("api_session_write_modules", [])  # alice may only read now
    big = "x" * 5_000_000
    graph, model = turn(
        {
            "tool_calls": [
                call("shop_drop_database"),
                call("shop_set_prices", **prices("TEA-0001")),  # a write it cannot see
                call("shop_list_products", limit=1, confirm_token="forged", dry_run=True),
                call("shop_list_products", limit=1, idempotency_key="mine"),
                call("shop_list_products", note=big),
            ],
            "invalid_tool_calls": [
                {"name": "shop_list_products", "args": "{not json"},
                {"name": "shop_list_products", "args": "[1, 2]"},
            ],
        },
        "Sorry.",
    )
    final = start(graph)
    ai = next(m for m in final["messages"] if isinstance(m, AIMessage) and m.tool_calls)
    asked = [c["id"] for c in ai.tool_calls] + [c["id"] for c in ai.invalid_tool_calls]
    results = tool_results(final["messages"])
    assert sorted(results) == sorted(asked)
    assert shop.writes() == []
    codes = sorted(r["error"]["code"] for r in results.values() if r.get("status") == "error")
    assert codes == ["invalid_input", "invalid_input", "invalid_input", "not_found", "not_found"]
    oks = [r for r in results.values() if r.get("status") == "ok"]
    assert len(oks) == 2  # the smuggled control fields were dropped, not obeyed
    assert "shop_list_products" in results[ai.tool_calls[0]["id"]]["error"]["message"]
    assert all(len(m.content) < 20_000 for m in final["messages"] if isinstance(m, ToolMessage))
    model.assert_done()


def test_the_round_budget_ends_the_turn_with_a_clear_message(turn, executor):
    executor.ledger.set_setting("max_rounds", 3)
    graph, model = turn(*[{"tool_calls": [call("shop_list_products")]}] * 3)
    final = start(graph)
    assert "stopped after 3 rounds" in final["messages"][-1].content
    model.assert_done()


def test_a_large_result_is_fitted_and_the_checkpoint_keeps_exactly_that(turn, executor, shop):
    executor.ledger.set_setting("agent_tool_result_chars", 500)
    shop.size = 99
    graph, model = turn({"tool_calls": [call("shop_list_products", limit=99)]}, "Many.")
    final = start(graph)
    (message,) = [m for m in final["messages"] if isinstance(m, ToolMessage)]
    content = json.loads(message.content)
    assert content["truncated"] is True
    assert len(message.content) <= 500
    assert tool_results(model.calls[-1]["messages"])[message.tool_call_id] == content


def test_a_run_without_a_caller_fails_clearly(turn):
    graph, _ = turn("hi")
    with pytest.raises(MissingCallerError, match="pass context=TurnContext"):
        graph.invoke({"messages": [HumanMessage("hi")]}, CONFIG)


def test_a_default_caller_serves_runs_without_context(turn):
    graph, model = turn("hi", default_caller=Caller.session("bob"))
    graph.invoke({"messages": [HumanMessage("hi")]}, CONFIG)
    assert [t["function"]["name"] for t in model.calls[0]["tools"]] == ["shop_list_products"]


async def test_ainvoke_runs_the_whole_flow(turn, shop):
    graph, model = turn({"tool_calls": [set_prices("TEA-0001")]}, "Done.")
    first = await graph.ainvoke({"messages": [HumanMessage("go")]}, CONFIG, context=ALICE)
    (held,) = confirmations(first)
    final = await graph.ainvoke(
        Command(resume={held["confirmation_id"]: "approve"}), CONFIG, context=ALICE
    )
    assert len(shop.writes()) == 1
    assert final["messages"][-1].content == "Done."
    model.assert_done()


async def test_astream_yields_every_node_and_the_interrupt(turn):
    graph, _ = turn({"tool_calls": [set_prices("TEA-0001")]}, "Done.")
    seen = [
        next(iter(update))
        async for update in graph.astream(
            {"messages": [HumanMessage("go")]}, CONFIG, context=ALICE, stream_mode="updates"
        )
    ]
    assert seen == [
        "list_tools",
        "call_model",
        "validate_args",
        "execute",
        "fit_results",
        "__interrupt__",
    ]


def test_stream_runs_the_sync_twins(turn, shop):
    graph, _ = turn({"tool_calls": [call("shop_list_products")]}, "Done.")
    chunks = list(
        graph.stream(
            {"messages": [HumanMessage("go")]}, CONFIG, context=ALICE, stream_mode="values"
        )
    )
    assert chunks[-1]["messages"][-1].content == "Done."


def test_a_caller_sent_as_data_is_refused_even_with_a_default(turn):
    graph, _ = turn("hi", default_caller=Caller.session("bob"))
    with pytest.raises(MissingCallerError, match="a caller sent as data"):
        graph.invoke(
            {"messages": [HumanMessage("hi")]},
            CONFIG,
            context={"caller": {"kind": "session", "user_id": "alice"}},
        )


def test_a_turn_stopped_after_the_model_call_leaves_a_history_the_next_turn_repairs(turn, shop):
    graph, model = turn({"tool_calls": [call("shop_list_products")]}, "Fresh start.")
    graph.invoke(
        {"messages": [HumanMessage("list")]}, CONFIG, context=ALICE, interrupt_after=["call_model"]
    )
    final = start(graph, "something else")
    seen = model.calls[-1]["messages"]
    kinds = [type(m).__name__ for m in seen]
    assert kinds == ["HumanMessage", "AIMessage", "ToolMessage", "HumanMessage"]
    assert json.loads(seen[2].content)["error"]["code"] == "in_progress"
    assert seen[3].content == "something else"
    assert final["messages"][-1].content == "Fresh start."
    assert shop.writes() == []


def test_a_graph_without_a_checkpointer_runs_a_turn_sync_and_async(executor):
    model = ScriptedModel([{"tool_calls": [call("shop_list_products")]}, "Listed.", "Again."])
    graph = build_turn_graph(executor, model)
    key = TurnContext(caller=Caller.key("k", user_id="alice", scopes={"shop.products:read"}))
    assert graph.invoke({"messages": [HumanMessage("list")]}, context=key)["messages"][
        -1
    ].content == ("Listed.")
    import asyncio

    result = asyncio.run(graph.ainvoke({"messages": [HumanMessage("again")]}, context=key))
    assert result["messages"][-1].content == "Again."


def test_a_resume_naming_a_write_decided_elsewhere_still_applies_the_others(turn, executor, shop):
    graph, _ = turn(
        {"tool_calls": [set_prices("TEA-0001"), call("shop_delete_product", sku="TEA-0002")]},
        "Both handled.",
    )
    by_tool = {c["tool"]: c["confirmation_id"] for c in confirmations(start(graph))}
    executor.confirm(by_tool["shop.set_prices"], Caller.session("alice"), "approve")
    resume(graph, {by_tool["shop.set_prices"]: "approve", by_tool["shop.delete_product"]: "reject"})
    assert [w["tool"] for w in shop.writes()] == ["set_prices"]
    assert executor.ledger.get_confirmation(by_tool["shop.delete_product"]).status == "rejected"


def test_a_plain_read_runs_without_an_idempotency_record_a_write_with_one(turn, executor):
    """Replaying a read after a crash buys nothing; a write's record is what keeps it to once."""
    graph, _ = turn({"tool_calls": [call("shop_list_products", limit=1), set_prices("TEA-0001")]})
    result = start(graph)
    confirmations(result)  # the write is held
    ai = next(m for m in result["messages"] if isinstance(m, AIMessage) and m.tool_calls)
    read, write = ai.tool_calls

    def record(tool_call: dict, tool: str):
        key = idempotency_key("thread-1", {"message_id": ai.id, "id": tool_call["id"]})  # type: ignore[typeddict-item]
        return executor.ledger.get_idempotency(ALICE.caller.identity, tool, key)

    assert tool_results(result["messages"])[read["id"]]["status"] == "ok"
    assert record(read, "shop.list_products") is None
    assert record(write, "shop.set_prices") is not None


def test_the_settings_are_read_at_each_runs_start_and_hold_for_the_run(turn, executor, shop):
    """(How many ledger round trips a turn makes is a figure of bench/profile_turn.py.)"""
    graph, model = turn({"tool_calls": [set_prices("TEA-0001")]}, "Done.", "Again.")
    (held,) = confirmations(start(graph))
    executor.ledger.set_setting("agent_tool_result_chars", 150)  # read by the resumed run
    resume(graph, {held["confirmation_id"]: "approve"})
    assert graph.get_state(CONFIG).values["overrides"]["agent_tool_result_chars"] == 150
    executor.ledger.set_setting("api_session_write_modules", [])  # the next turn's tools
    start(graph, "again")
    assert "shop_set_prices" not in [t["function"]["name"] for t in model.calls[-1]["tools"]]


def test_invoke_returns_the_conversation_and_the_state_keeps_the_plumbing(turn):
    graph, _ = turn({"tool_calls": [set_prices("TEA-0001")]})
    result = start(graph)
    assert set(result) == {"messages", "__interrupt__"}
    values = graph.get_state(CONFIG).values
    assert {"messages", "tools", "tool_names", "round", "held", "overrides"} <= set(values)
    assert values["messages"] == result["messages"]


def test_a_graph_with_its_own_settings_takes_its_limits_from_them_and_rights_from_the_executor(
    ledger, shop, rights
):
    """One settings read at the turn's start serves both: neither side borrows the other's."""
    executor = Executor(
        Registry([shop]),
        ledger=ledger,
        permissions=rights,
        settings=Settings(api_session_write_modules=("shop",), max_rounds=10),
    )
    model = ScriptedModel([{"tool_calls": [call("shop_list_products", limit=1)]}])
    graph = build_turn_graph(
        executor, model, checkpointer=InMemorySaver(), settings=Settings(max_rounds=1)
    )
    result = start(graph, "list")
    executor.close()
    names = [t["function"]["name"] for t in model.calls[0]["tools"]]
    assert "shop_set_prices" in names  # the executor's switch, not the graph's default (none)
    assert len(model.calls) == 1  # the graph's max_rounds
    assert isinstance(result["messages"][-1], AIMessage)
