"""``TurnkitMiddleware`` in ``create_agent``: the turn graph's scripted scenarios — visible tools,
hostile calls, holds decided with approve / edit / reject in LangChain's HITL shape — in every run
mode on memory, SQLite and PostgreSQL checkpointers (``agents`` fixture)."""

from __future__ import annotations

import asyncio
import json

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, HumanInTheLoopMiddleware, ModelResponse
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from _shop import prices
from turnkit import Caller, Decision, MissingCallerError, ResumeError, Settings
from turnkit.graph import TurnContext
from turnkit.middleware import TurnkitMiddleware
from turnkit.testing import ScriptedModel

ALICE = TurnContext(caller=Caller.session("alice"))
BOB = TurnContext(caller=Caller.session("bob"))
SET = {"name": "shop_set_prices", "args": prices("TEA-0001"), "id": "w1"}
DELETE = {"name": "shop_delete_product", "args": {"sku": "TEA-0002"}, "id": "w2"}
GO = {"messages": [HumanMessage("go")]}


def results(messages) -> dict[str, dict]:
    return {m.tool_call_id: json.loads(m.content) for m in messages if isinstance(m, ToolMessage)}


def shown(model, call: int = 0) -> list[str]:
    return [t["function"]["name"] for t in model.calls[call]["tools"]]


def test_the_model_is_shown_only_the_tools_the_caller_may_use_now(agents):
    model = ScriptedModel(["Hello.", "Hello again."])
    agents.send(model, GO, BOB)
    assert shown(model) == ["shop_list_products"]
    agents.ledger.set_setting("api_session_write_modules", [])
    agents.send(model, {"messages": [HumanMessage("and now?")]}, ALICE)
    assert shown(model, 1) == ["shop_list_products"]


def test_hostile_calls_are_answered_and_nothing_wrong_runs(agents, shop):
    round_one = {
        "tool_calls": [
            {"name": "shop_list_products", "args": {"limit": 1, "dry_run": True}, "id": "read"},
            {"name": "shop_burn_it_down", "args": {}, "id": "unknown"},
            {"name": "shop_set_prices", "args": {"prices": "cheap"}, "id": "bad"},
            {"name": "shop_delete_product", "args": {"sku": "TEA-0001"}, "id": "hidden"},
            {"name": "shop_list_products", "args": {}, "id": "read"},
        ],
        "invalid_tool_calls": [{"name": "shop_list_products", "args": "{oops", "id": "json"}],
    }
    model = ScriptedModel([round_one, "Done."])
    done = agents.send(model, GO, BOB)  # bob may only read
    assert done.interrupts == []
    answers = results(done.messages)
    assert answers["read"]["result"] == [{"sku": "TEA-0001", "price": 4.5}]  # dry_run dropped
    assert answers["unknown"]["error"]["code"] == "not_found"
    assert (
        "Call one of the available tools: shop_list_products"
        in (answers["unknown"]["error"]["message"])
    )
    assert answers["bad"]["error"]["code"] == "not_found"  # bob cannot see set_prices
    assert answers["hidden"]["error"]["code"] == "not_found"
    assert "not valid JSON" in answers["json"]["error"]["message"]
    assert "repeats the id 'read'" in answers["read-2"]["error"]["message"]
    names = {m.tool_call_id: m.name for m in done.messages if isinstance(m, ToolMessage)}
    assert names["read-2"] == "shop_list_products"
    assert names["unknown"] == "shop_burn_it_down"
    assert shop.writes() == []
    model.assert_done()


def test_schema_violations_are_listed_for_the_model(agents):
    bad = {"name": "shop_set_prices", "args": {"prices": [{"sku": "tea", "price": -1}]}, "id": "b"}
    model = ScriptedModel([{"tool_calls": [bad]}, "I will fix it."])
    done = agents.send(model, GO, ALICE)
    error = results(done.messages)["b"]["error"]
    assert error["code"] == "invalid_input"
    assert {v["path"] for v in error["details"]["violations"]} == {
        "/prices/0/sku",
        "/prices/0/price",
    }


def deep(depth: int) -> dict:
    value: dict = {"a": 1}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


@pytest.mark.parametrize("sent", ["parsed", "text"])
def test_arguments_nested_ten_thousand_deep_are_invalid_input_and_the_run_goes_on(
    agents, shop, sent
):
    """As on the turn graph: ``json.dumps`` and ``repr`` overflow on them, the answer does not."""
    if sent == "parsed":
        step = {"tool_calls": [{"name": "shop_list_products", "args": deep(10_000), "id": "d"}]}
    else:
        text = '{"a": ' * 10_000 + "1" + "}" * 10_000
        step = {"invalid_tool_calls": [{"name": "shop_list_products", "args": text, "id": "d"}]}
    model = ScriptedModel([step, "Sorry."])
    done = agents.send(model, GO, BOB)
    assert done.messages[-1].content == "Sorry."
    error = results(model.calls[1]["messages"])["d"]["error"]  # what the model was asked again with
    assert error["code"] == "invalid_input"
    assert "nests deeper than 64 levels" in error["message"]
    assert shop.reads == 0
    model.assert_done()


def test_a_reply_with_only_unparseable_calls_goes_back_to_the_model(agents):
    model = ScriptedModel(
        [{"invalid_tool_calls": [{"name": "shop_set_prices", "args": "{", "id": "j"}]}, "Sorry."]
    )
    done = agents.send(model, GO, ALICE)
    assert done.messages[-1].content == "Sorry."
    model.assert_done()


def test_a_model_that_only_sends_unparseable_calls_is_asked_max_rounds_times_in_one_step(executor):
    broken = [{"invalid_tool_calls": [{"name": "shop_list_products", "args": "{", "id": f"j{i}"}]}
              for i in range(3)]  # fmt: skip
    model = ScriptedModel([*broken, "never asked"])
    agent = create_agent(
        model,
        middleware=[TurnkitMiddleware(executor, settings=Settings(max_rounds=3))],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "stubborn"}}
    steps = [next(iter(update)) for update in agent.stream(GO, config, context=BOB)]
    messages = agent.get_state(config).values["messages"]
    assert steps == ["model"]
    assert len(model.calls) == 3
    assert [m.type for m in model.calls[2]["messages"]] == ["human", "ai", "tool", "ai", "tool"]
    assert [m.type for m in messages] == ["human", "ai", "tool"]  # the last reply, answered
    assert messages[2].tool_call_id == "j2"


def test_a_held_write_interrupts_in_the_hitl_shape_and_an_approval_runs_it_once(agents, shop):
    model = ScriptedModel([{"tool_calls": [SET, DELETE]}, "Done."])
    paused = agents.send(model, GO, ALICE)
    assert shop.writes() == []
    (interrupt,) = paused.interrupts
    assert [r["name"] for r in paused.requests] == ["shop_set_prices", "shop_delete_product"]
    assert [c["tool"] for c in interrupt.value["confirmations"]] == [
        "shop.set_prices",
        "shop.delete_product",
    ]
    assert [c["allowed_decisions"] for c in interrupt.value["review_configs"]] == [
        ["approve", "edit", "reject"]
    ] * 2
    assert results(paused.messages)["w1"]["status"] == "confirmation_required"
    resume = {"decisions": [{"type": "approve"}, {"type": "reject", "message": "Keep it."}]}
    done = agents.send(model, Command(resume=resume), ALICE)
    assert done.interrupts == []
    assert [w["tool"] for w in shop.writes()] == ["set_prices"]
    answers = results(done.messages)
    assert answers["w1"] == {"executed": True, "status": "ok", "result": {"updated": 1}}
    assert answers["w2"]["message"] == "Keep it."
    assert done.messages[-1].content == "Done."
    last = model.calls[-1]["messages"]
    assert json.loads(last[-1].content)["status"] == "rejected"  # the model saw the outcomes
    model.assert_done()


def test_an_edit_runs_the_edited_arguments_once(agents, shop):
    model = ScriptedModel([{"tool_calls": [SET]}, "Done."])
    agents.send(model, GO, ALICE)
    edited = prices("TEA-0001", price=4.25)
    edit = {"type": "edit", "edited_action": {"name": "shop_set_prices", "args": edited}}
    agents.send(model, Command(resume={"decisions": [edit]}), ALICE)
    assert [w["input"] for w in shop.writes()] == [edited]


def test_an_edit_that_breaks_the_schema_or_a_call_left_out_is_asked_again_at_once(agents, shop):
    """Nothing is left held with nobody asked: the hook asks again, with the reason, before the
    model runs; the person's next answer decides, and each write runs once."""
    model = ScriptedModel([{"tool_calls": [SET, DELETE]}, "Done."])
    paused = agents.send(model, GO, ALICE)
    first, second = (c["confirmation_id"] for c in paused.interrupts[0].value["confirmations"])
    broken = {"type": "edit", "edited_action": {"name": "shop_set_prices",
                                                "args": prices("TEA-0001", price=-1)}}  # fmt: skip
    again = agents.send(model, Command(resume={"decisions": [broken, {"type": "approve"}]}), ALICE)
    (interrupt,) = again.interrupts
    assert [c["confirmation_id"] for c in interrupt.value["confirmations"]] == [first]
    (request,) = interrupt.value["action_requests"]
    assert "minimum" in request["description"]  # why the edit was not applied
    assert [w["tool"] for w in shop.writes()] == ["delete_product"]
    left_out = agents.send(model, Command(resume={second: "approve"}), ALICE)  # not the held one
    assert [c["confirmation_id"] for c in left_out.interrupts[0].value["confirmations"]] == [first]
    done = agents.send(model, Command(resume={"decisions": [{"type": "approve"}]}), ALICE)
    assert done.interrupts == []
    assert [w["tool"] for w in shop.writes()] == ["delete_product", "set_prices"]
    assert results(done.messages)["w1"]["status"] == "ok"
    model.assert_done()


def test_more_decisions_than_action_requests_with_nothing_decided_since_are_refused(agents, shop):
    """As on the turn graph: both held calls still wait, so three decisions for the two action
    requests are a wrong count; nothing is decided, and the right answer is taken next."""
    model = ScriptedModel([{"tool_calls": [SET, DELETE]}, "Done."])
    agents.send(model, GO, ALICE)
    approve, reject = {"type": "approve"}, {"type": "reject", "message": "Keep it."}
    with pytest.raises(ResumeError, match=r"3 decisions for 2 held calls \['shop_set_prices'"):
        agents.send(model, Command(resume={"decisions": [approve, reject, approve]}), ALICE)
    assert shop.writes() == []
    assert len(agents.executor(agents.ledger).pending()) == 2
    done = agents.send(model, Command(resume={"decisions": [approve, reject]}), ALICE)
    assert done.interrupts == []
    assert [w["tool"] for w in shop.writes()] == ["set_prices"]
    model.assert_done()


def test_decisions_for_a_round_that_shrank_since_the_person_was_asked_ask_again(agents, shop):
    """One of the two held calls was decided elsewhere between the interrupt and the answer:
    the positions no longer say whose decision is whose, so the other is asked about again."""
    model = ScriptedModel([{"tool_calls": [SET, DELETE]}, "Done."])
    paused = agents.send(model, GO, ALICE)
    first, second = (c["confirmation_id"] for c in paused.interrupts[0].value["confirmations"])
    agents.executor(agents.ledger).confirm(first, Caller.session("alice"), Decision.approve())
    rendered = {"decisions": [{"type": "approve"}, {"type": "reject", "message": "Keep it."}]}
    again = agents.send(model, Command(resume=rendered), ALICE)
    (interrupt,) = again.interrupts
    assert [c["confirmation_id"] for c in interrupt.value["confirmations"]] == [second]
    done = agents.send(model, Command(resume={"decisions": [{"type": "approve"}]}), ALICE)
    assert done.interrupts == []
    assert [w["tool"] for w in shop.writes()] == ["set_prices", "delete_product"]
    model.assert_done()


def test_an_edit_of_another_tool_is_refused_and_nothing_is_decided(agents, shop):
    model = ScriptedModel([{"tool_calls": [SET]}, "Done."])
    paused = agents.send(model, GO, ALICE)
    other = {"name": "shop_delete_product", "args": {"sku": "TEA-0001"}}
    with pytest.raises(ResumeError, match="an edit may change the arguments, not the tool"):
        agents.send(
            model, Command(resume={"decisions": [{"type": "edit", "edited_action": other}]}), ALICE
        )
    assert shop.writes() == []
    (held,) = paused.interrupts[0].value["confirmations"]
    done = agents.send(model, Command(resume={held["confirmation_id"]: "approve"}), ALICE)
    assert done.interrupts == []
    assert len(shop.writes()) == 1


@pytest.mark.parametrize("where", ["edit", "entry"])
def test_a_resume_value_nested_ten_thousand_deep_is_refused_and_nothing_is_decided(
    agents, shop, where
):
    model = ScriptedModel([{"tool_calls": [SET]}, "Done."])
    paused = agents.send(model, GO, ALICE)
    edited = {"name": "shop_set_prices", "args": {"prices": deep(10_000)}}
    entry = {"type": "edit", "edited_action": edited} if where == "edit" else [deep(10_000)]
    with pytest.raises(ResumeError, match="the resume value is not plain JSON within the limits"):
        agents.send(model, Command(resume={"decisions": [entry]}), ALICE)
    assert shop.writes() == []
    (held,) = paused.interrupts[0].value["confirmations"]
    done = agents.send(model, Command(resume={held["confirmation_id"]: "approve"}), ALICE)
    assert done.interrupts == []
    assert len(shop.writes()) == 1


def test_a_hold_decided_elsewhere_reaches_the_conversation_at_the_next_model_call(agents, shop):
    model = ScriptedModel([{"tool_calls": [SET]}, "Noted."])
    paused = agents.send(model, GO, ALICE)
    (held,) = paused.interrupts[0].value["confirmations"]
    executor = agents.executor(agents.ledger)
    executor.confirm(held["confirmation_id"], Caller.session("alice"), Decision.approve())
    done = agents.send(model, {"messages": [HumanMessage("did it work?")]}, ALICE)
    assert done.interrupts == []
    assert results(done.messages)["w1"]["status"] == "ok"
    assert json.loads(model.calls[-1]["messages"][2].content)["status"] == "ok"
    assert len(shop.writes()) == 1


def test_a_key_callers_write_runs_at_once_with_the_threads_idempotency_key(agents, shop):
    key = TurnContext(caller=Caller.key("key-1", user_id="alice", scopes={"shop.products:write"}))
    model = ScriptedModel([{"tool_calls": [SET]}, "Done."])
    done = agents.send(model, GO, key)
    assert done.interrupts == []
    assert results(done.messages)["w1"]["status"] == "ok"
    executor = agents.executor(agents.ledger)
    ai = next(m for m in done.messages if getattr(m, "tool_calls", None))
    recorded = executor.recorded(key.caller, "shop.set_prices", f"turn:{agents.thread}:{ai.id}:w1")
    assert recorded is not None
    assert len(shop.writes()) == 1


def test_the_agents_own_tools_run_as_before():
    @tool
    def shout(text: str) -> str:
        """Say it louder."""
        return text.upper()

    from turnkit import Executor, Registry

    calls = [{"name": "shout", "args": {"text": "hi"}}, {"name": "whisper", "args": {}, "id": "w"}]
    model = ScriptedModel([{"tool_calls": calls}, "Ok."])
    agent = create_agent(
        model,
        tools=[shout],
        middleware=[TurnkitMiddleware(Executor(Registry([])))],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "own"}}
    done = agent.invoke(GO, config, context=ALICE)
    tool_messages = [m for m in done["messages"] if isinstance(m, ToolMessage)]
    assert tool_messages[0].content == "HI"
    unknown = json.loads(tool_messages[1].content)["error"]["message"]
    assert unknown == "There is no tool named 'whisper'. Call one of the available tools: shout."
    assert shown(model) == ["shout"]


def run_in(mode: str, agent, request, config, context) -> dict:
    """``agent`` run once in ``mode``; its state's values after the run."""
    if mode == "invoke":
        agent.invoke(request, config, context=context)
    elif mode == "stream":
        list(agent.stream(request, config, context=context, stream_mode="updates"))
    elif mode == "ainvoke":
        asyncio.run(agent.ainvoke(request, config, context=context))
    else:

        async def drain() -> None:
            async for _ in agent.astream(request, config, context=context, stream_mode="updates"):
                pass

        asyncio.run(drain())
    return agent.get_state(config)


@pytest.mark.parametrize("first", ["hitl", "turnkit"])
@pytest.mark.parametrize("mode", ["invoke", "stream", "ainvoke", "astream"])
def test_beside_hitl_for_the_agents_own_tools_unrunnable_calls_are_answered_once(
    executor, mode, first
):
    """Answered in the model's step, before HITL's ``after_model`` asks about the agent's own
    tool: a reply of unparseable calls only goes back to the model, and a reply mixing one with
    a call HITL holds is answered once, the held call run after the person's yes."""

    @tool
    def shout(text: str) -> str:
        """Say it louder."""
        return text.upper()

    broken = {"name": "shop_list_products", "args": "{", "id": "broken"}
    loud = {"name": "shout", "args": {"text": "hi"}, "id": "loud"}
    model = ScriptedModel(
        [{"invalid_tool_calls": [broken]}, {"tool_calls": [loud], "invalid_tool_calls": [broken]},
         "Done."]
    )  # fmt: skip
    agent = create_agent(
        model,
        tools=[shout],
        middleware=[HumanInTheLoopMiddleware({"shout": True}), TurnkitMiddleware(executor)][
            :: 1 if first == "hitl" else -1
        ],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": f"beside-hitl-{mode}-{first}"}}
    paused = run_in(mode, agent, GO, config, BOB)
    assert [i.value["action_requests"][0]["name"] for i in paused.interrupts] == ["shout"]
    done = run_in(mode, agent, Command(resume={"decisions": [{"type": "approve"}]}), config, BOB)
    answers = [(m.tool_call_id, m.content) for m in done.values["messages"] if m.type == "tool"]
    assert [call_id for call_id, _ in answers] == ["broken", "loud"]  # the attempt before: not kept
    assert "not valid JSON" in json.loads(answers[0][1])["error"]["message"]
    assert answers[1][1] == "HI"
    assert [m.type for m in model.calls[1]["messages"]] == ["human", "ai", "tool"]
    assert done.values["messages"][-1].content == "Done."
    model.assert_done()


def test_a_middleware_around_it_that_reads_the_first_reply_gets_the_one_that_ran(executor):
    """LangChain's examples read ``response.result[0]``: after the model was asked again in the
    step, the response holds that last reply only."""

    class FirstReplyOnly(AgentMiddleware):
        def wrap_model_call(self, request, handler):
            response = handler(request)
            return ModelResponse(result=[response.result[0]])

    @tool
    def shout(text: str) -> str:
        """Say it louder."""
        return text.upper()

    broken = {"name": "shop_list_products", "args": "{", "id": "broken"}
    loud = {"name": "shout", "args": {"text": "hi"}, "id": "loud"}
    model = ScriptedModel([{"invalid_tool_calls": [broken]}, {"tool_calls": [loud]}, "Done."])
    agent = create_agent(
        model,
        tools=[shout],
        middleware=[FirstReplyOnly(), TurnkitMiddleware(executor)],
        checkpointer=InMemorySaver(),
    )
    done = agent.invoke(GO, {"configurable": {"thread_id": "around"}}, context=BOB)
    assert [m.type for m in done["messages"]] == ["human", "ai", "tool", "ai"]
    assert done["messages"][2].content == "HI"
    model.assert_done()


def test_a_run_without_a_caller_fails_clearly(executor):
    model = ScriptedModel(["Hello."])
    agent = create_agent(model, middleware=[TurnkitMiddleware(executor)])
    with pytest.raises(MissingCallerError, match="this turn has no caller"):
        agent.invoke(GO)
    agent = create_agent(
        ScriptedModel(["Hello."]),
        middleware=[TurnkitMiddleware(executor, default_caller=Caller.session("bob"))],
    )
    assert agent.invoke(GO)["messages"][-1].content == "Hello."


def test_a_turn_that_holds_nothing_takes_fewer_steps_than_a_hitl_agent(executor):
    """No hook step of its own around the model: holds are settled, and unrunnable calls
    answered, in the model's step (HITL's agent: model, its after_model, tools, model, again)."""
    read = {"name": "shop_list_products", "args": {}, "id": "r"}
    agent = create_agent(
        ScriptedModel([{"tool_calls": [read]}, "Done."]),
        middleware=[TurnkitMiddleware(executor)],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "steps"}}
    steps = [next(iter(update)) for update in agent.stream(GO, config, context=BOB)]
    assert steps == ["model", "tools", "model"]


def test_an_approved_hold_replaces_its_notice_in_place(agents, shop):
    model = ScriptedModel([{"tool_calls": [SET]}, "Done."])
    agents.send(model, GO, ALICE)
    done = agents.send(model, Command(resume={"decisions": [{"type": "approve"}]}), ALICE)
    assert [m.type for m in done.messages] == ["human", "ai", "tool", "ai"]
    assert json.loads(done.messages[2].content)["status"] == "ok"
    assert [m.type for m in model.calls[-1]["messages"]] == ["human", "ai", "tool"]
    assert len(shop.writes()) == 1


def test_a_round_reads_the_operators_settings_once(executor, ledger, monkeypatch):
    """The model call's reading serves its round: its tool calls and the model call after them."""
    reads = []
    read = type(ledger).settings
    monkeypatch.setattr(type(ledger), "settings", lambda self: reads.append(1) or read(self))
    calls = [{"name": "shop_list_products", "args": {}, "id": f"r{i}"} for i in range(2)]
    agent = create_agent(
        ScriptedModel([{"tool_calls": calls}, "Done."]),
        middleware=[TurnkitMiddleware(executor)],
        checkpointer=InMemorySaver(),
    )
    done = agent.invoke(GO, {"configurable": {"thread_id": "once"}}, context=BOB)
    assert [json.loads(m.content)["status"] for m in done["messages"][2:4]] == ["ok", "ok"]
    assert len(reads) == 1


def test_a_permission_revoked_while_the_model_is_asked_refuses_its_call(executor, rights, shop):
    """Rights are checked when the call runs, not when the model was shown the tool."""

    def revoke_then_write(messages, tools):
        rights.revoke("alice", "shop.manage")
        return {"tool_calls": [SET]}

    executor.ledger.set_setting("api_session_write_modules", ["shop"])
    agent = create_agent(
        ScriptedModel([revoke_then_write, "Sorry."]),
        middleware=[TurnkitMiddleware(executor)],
        checkpointer=InMemorySaver(),
    )
    done = agent.invoke(GO, {"configurable": {"thread_id": "revoked"}}, context=ALICE)
    assert json.loads(done["messages"][2].content)["error"]["code"] == "not_found"
    assert "__interrupt__" not in done
    assert shop.writes() == []


def test_a_rounds_reading_of_the_settings_is_not_kept_past_round_seconds():
    from langchain_core.messages import AIMessage

    from turnkit.middleware.round_settings import (  # internal: the round's memo, by its clock
        ROUND_SECONDS,
        RoundSettings,
    )

    now = [100.0]
    kept = RoundSettings(clock=lambda: now[0])
    ai = AIMessage("", id="ai-1", tool_calls=[{"name": "x", "args": {}, "id": "c"}])
    kept.keep([ai], {"max_rounds": 3})
    answers = [HumanMessage("go"), ai, ToolMessage("{}", tool_call_id="c")]
    assert kept.of("ai-1") == {"max_rounds": 3}
    assert kept.answered(answers) == {"max_rounds": 3}
    assert kept.answered([*answers, HumanMessage("and?")]) is None  # a new turn reads again
    now[0] += ROUND_SECONDS + 0.1
    assert kept.of("ai-1") is None
    assert kept.answered(answers) is None
