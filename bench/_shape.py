"""turnkit's shape without turnkit's work: the floor LangGraph sets for a six-node turn.

The same six nodes, the same state channels (``TurnState``, messages as deltas), the same routes
and read views as ``build_turn_graph`` — but each node does only what the turn needs to produce
the same messages: bind the tools and call the model, run the tool function, wrap its result.
No rights, no validation, no ledger, no fitting. Async runs await the model and run the other
nodes on the event loop, as turnkit's do, but for the tool function: a sync function may block,
so an async run calls it in a worker thread, as LangChain's tools do (``create_agent``'s
``ToolNode`` too) and as any runtime must that never blocks its event loop. ``turnkit ÷ shape``
is then the price of turnkit's own work, and ``shape ÷ create_agent`` the price of six visible
steps in LangGraph. ``three_step_graph`` does the same work, on the same channels, in
``create_agent``'s three steps: the control that tells the steps' cost from the state's.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.graph import END, START, StateGraph

from bench import _common
from turnkit._compat import RunnableCallable
from turnkit.graph import TurnOutput, TurnState
from turnkit.graph.build import wire

__all__ = ["shape_graph", "three_step_graph"]


def shape_graph(model: Any, checkpointer: Any = None) -> Any:
    """The six-node turn graph with nodes that do the least work (see the module's doc)."""
    call_model, acall_model, functions = _model_and_tools(model)

    def list_tools(state: Any) -> dict[str, Any]:
        return {"round": 0, "calls": [], "answers": {}, "held": [], "overrides": {}}

    def validate_args(state: Any) -> dict[str, Any]:
        ai: AIMessage = state["messages"][-1]
        return {"calls": [dict(c) for c in ai.tool_calls], "answers": {}}

    def execute(state: Any) -> dict[str, Any]:
        answers = {
            c["id"]: {"content": json.dumps(functions[c["name"]](**c["args"])), "status": "success"}
            for c in state["calls"]
        }
        return {"answers": answers, "calls": []}

    async def aexecute(state: Any) -> dict[str, Any]:
        answers = {}
        for c in state["calls"]:  # a sync tool function, off the event loop
            result = await asyncio.to_thread(functions[c["name"]], **c["args"])
            answers[c["id"]] = {"content": json.dumps(result), "status": "success"}
        return {"answers": answers, "calls": []}

    def fit_results(state: Any) -> dict[str, Any]:
        messages = [
            ToolMessage(a["content"], tool_call_id=cid) for cid, a in state["answers"].items()
        ]
        return {"messages": messages, "answers": {}, "held": []}

    def await_confirmation(state: Any) -> dict[str, Any]:
        return {"held": []}

    graph = StateGraph(TurnState, output_schema=TurnOutput)
    twins = {"call_model": acall_model, "execute": aexecute}
    nodes = {  # async runs call the model and the tool without blocking, the rest on the loop
        name: RunnableCallable(node, twins.get(name) or _on_the_loop(node), name=name, trace=False)
        for name, node in [
            ("list_tools", list_tools),
            ("call_model", call_model),
            ("validate_args", validate_args),
            ("execute", execute),
            ("fit_results", fit_results),
            ("await_confirmation", await_confirmation),
        ]
    }
    wire(graph, nodes)
    return graph.compile(checkpointer=checkpointer)


def _on_the_loop(node: Any) -> Any:
    """The async twin of ``node``, run inline on the loop (as turnkit's nodes that need nothing
    that blocks)."""

    async def inline(state: Any) -> dict[str, Any]:
        return node(state)  # type: ignore[no-any-return]

    return inline


def three_step_graph(model: Any, checkpointer: Any = None) -> Any:
    """The shape's work in ``create_agent``'s three steps (a model node, a tools node, back), on
    the same state channels, each written at least once a turn as the six steps do (with the
    values they leave): not a turn we would ship (a person could not stop between
    validation and execution), but what tells the six steps' cost from the state's. Where it
    matches ``create_agent``, what the six-step shape costs beyond it is the steps themselves."""
    model_only, amodel_only, functions = _model_and_tools(model)
    cleared = {"calls": [], "answers": {}, "held": []}  # what the six steps leave at the end
    first = {**cleared, "overrides": {}}  # and what their list_tools writes at the start

    def call_model(state: Any) -> dict[str, Any]:
        return {**(first if not state.get("round") else {}), **model_only(state)}

    async def acall_model(state: Any) -> dict[str, Any]:
        return {**(first if not state.get("round") else {}), **(await amodel_only(state))}

    def run_tools(state: Any) -> dict[str, Any]:
        calls = state["messages"][-1].tool_calls
        results = [json.dumps(functions[c["name"]](**c["args"])) for c in calls]
        messages = [_answer(c, r) for c, r in zip(calls, results, strict=True)]
        return {"messages": messages, **cleared}

    async def arun_tools(state: Any) -> dict[str, Any]:
        messages = []
        for c in state["messages"][-1].tool_calls:  # a sync tool function, off the event loop
            result = await asyncio.to_thread(functions[c["name"]], **c["args"])
            messages.append(_answer(c, json.dumps(result)))
        return {"messages": messages, **cleared}

    def route(state: Any) -> str:
        return "tools" if state["messages"][-1].tool_calls else END

    graph = StateGraph(TurnState, output_schema=TurnOutput)
    graph.add_node("model", RunnableCallable(call_model, acall_model, name="model", trace=False))
    graph.add_node("tools", RunnableCallable(run_tools, arun_tools, name="tools", trace=False))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", route, ["tools", END])
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=checkpointer)


def _model_and_tools(model: Any) -> tuple[Any, Any, dict[str, Any]]:
    """``(call_model, acall_model, the tool functions by name)``: the model called with the two
    tools bound, a round counted."""
    tools = _common.langchain_tools()
    bound = model.bind_tools(tools)

    def call_model(state: Any) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["messages"])], "round": state.get("round", 0) + 1}

    async def acall_model(state: Any) -> dict[str, Any]:
        reply = await bound.ainvoke(state["messages"])
        return {"messages": [reply], "round": state.get("round", 0) + 1}

    return call_model, acall_model, {tool.name: tool.func for tool in tools}


def _answer(call: Any, content: str) -> ToolMessage:
    return ToolMessage(content, tool_call_id=call["id"])
