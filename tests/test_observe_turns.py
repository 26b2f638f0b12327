"""Spans of the turn graph and the create_agent middleware, in every run mode and on every
backend: the executor's spans nest under the run that is current (LangGraph's, LangSmith's, the
application's own), and a held write resumed with an approval is held → decided → ran."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import HumanMessage
from langgraph.types import Command
from opentelemetry import trace

from _shop import prices
from _weather import get_weather
from turnkit import Agent, Caller
from turnkit.graph import TurnContext
from turnkit.testing import ScriptedModel

ALICE = TurnContext(caller=Caller.session("alice"))
outer = trace.get_tracer("the application")


def named(spans, name):
    return [s for s in spans if s.name == name]


def check_story(spans, first_run, second_run):
    """The read and the hold under the first run, the decision under the second, linked."""
    (read,) = named(spans, "execute_tool shop.list_products")
    held, ran = named(spans, "execute_tool shop.set_prices")
    (hold,) = named(spans, "hold shop.set_prices")
    (decide,) = named(spans, "decide shop.set_prices")
    by_id = {s.context.span_id: s for s in spans}

    def run_of(span):
        while span.parent is not None and span.parent.span_id in by_id:
            span = by_id[span.parent.span_id]
        return span

    assert run_of(read) is first_run
    assert run_of(held) is first_run
    assert hold.parent.span_id == held.context.span_id
    assert run_of(decide) is second_run
    assert ran.parent.span_id == decide.context.span_id
    assert [link.context.span_id for link in decide.links] == [hold.context.span_id]
    assert [link.context.span_id for link in ran.links] == [hold.context.span_id]
    assert ran.attributes["gen_ai.conversation.id"] == held.attributes["gen_ai.conversation.id"]


def test_a_turn_s_spans_nest_under_the_current_run_and_tell_the_whole_story(turns, shop, traced):
    read = {"name": "shop_list_products", "args": {}, "id": "r1"}
    write = {"name": "shop_set_prices", "args": prices("TEA-0001"), "id": "w1"}
    model = ScriptedModel([{"tool_calls": [read, write]}, "Done."])
    with outer.start_as_current_span("first run"):
        (held,) = turns.send(model, {"messages": [HumanMessage("go")]}, ALICE).confirmations
    with outer.start_as_current_span("second run"):
        done = turns.send(model, Command(resume={held["confirmation_id"]: "approve"}), ALICE)
    assert done.interrupts == []
    assert len(shop.writes()) == 1
    spans = traced.stop()
    check_story(spans, named(spans, "first run")[0], named(spans, "second run")[0])


def test_the_middleware_s_spans_nest_under_the_current_run_too(agents, shop, traced):
    write = {"name": "shop_set_prices", "args": prices("TEA-0001"), "id": "w1"}
    read = {"name": "shop_list_products", "args": {}, "id": "r1"}
    model = ScriptedModel([{"tool_calls": [read, write]}, "Done."])
    with outer.start_as_current_span("first run"):
        first = agents.send(model, {"messages": [HumanMessage("go")]}, ALICE)
    assert len(first.requests) == 1
    with outer.start_as_current_span("second run"):
        agents.send(model, Command(resume={"decisions": [{"type": "approve"}]}), ALICE)
    assert len(shop.writes()) == 1
    spans = traced.stop()
    check_story(spans, named(spans, "first run")[0], named(spans, "second run")[0])


@pytest.mark.parametrize("mode", ["prompt", "stream", "aprompt", "astream"])
def test_an_agent_s_tool_spans_nest_under_the_application_s_span(mode, traced):
    model = ScriptedModel(
        [
            {"tool_calls": [{"name": "get_weather", "args": {"city": "Lisbon"}, "id": "c1"}]},
            "Sunny.",
        ]
    )
    with Agent(model, tools=[get_weather]) as agent, outer.start_as_current_span("app") as app:
        if mode == "prompt":
            agent.prompt("Weather?")
        elif mode == "stream":
            list(agent.stream("Weather?"))
        else:

            async def run():
                if mode == "aprompt":
                    await agent.aprompt("Weather?")
                else:
                    [update async for update in agent.astream("Weather?")]

            asyncio.run(run())
    spans = traced.stop()
    (call,) = [s for s in spans if s.name.startswith("execute_tool")]
    assert call.context.trace_id == app.get_span_context().trace_id
