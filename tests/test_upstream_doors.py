"""An upstream MCP server's tools through every door, as turnkit's own: the turn graph in each
run mode, the ``create_agent`` middleware, ``Agent``, and turnkit's own ``/mcp`` (REST and the
inbox: tests/test_docs_upstream.py). A session's write is held, approved, and runs once on the
upstream (the notes server counts its runs: ``tests/upstream_servers/notes.py`` over stdio)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from _serving import uvicorn_serving
from _upstream import ACT, ANN, NotesFiles, notes_stdio, rights
from turnkit import Agent, Executor, McpUpstream, Registry, open_ledger
from turnkit.graph import TurnContext, build_turn_graph
from turnkit.middleware import TurnkitMiddleware
from turnkit.server import create_app
from turnkit.testing import ScriptedModel

ANN_TURN = TurnContext(caller=ANN)


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[McpUpstream, NotesFiles]]:
    files = NotesFiles.under(tmp_path_factory.mktemp("notes-doors"))
    with notes_stdio(files, timeout=10, tools={"write_note": {"danger": "always"}}) as running:
        yield running, files


@pytest.fixture
def executor(upstream, tmp_path: Path) -> Iterator[Executor]:
    ledger = open_ledger(str(tmp_path / "ledger.sqlite"))
    running = Executor(Registry([upstream[0]]), ledger=ledger, permissions=rights(), settings=ACT)
    yield running
    running.close()
    ledger.close()


def write_call(name: str) -> dict[str, Any]:
    return {"name": "notes_write_note", "args": {"name": name, "text": "from a door"}, "id": name}


def script(name: str) -> ScriptedModel:
    return ScriptedModel([{"tool_calls": [write_call(name)]}, "Saved."])


async def drive(graph: Any, request: Any, config: Any, mode: str) -> dict[str, Any]:
    if mode == "invoke":
        return graph.invoke(request, config, context=ANN_TURN)
    if mode == "ainvoke":
        return await graph.ainvoke(request, config, context=ANN_TURN)
    if mode == "stream":
        for _ in graph.stream(request, config, context=ANN_TURN, stream_mode="updates"):
            pass
    else:
        async for _ in graph.astream(request, config, context=ANN_TURN, stream_mode="updates"):
            pass
    state = await graph.aget_state(config)
    return state.values | {"__interrupt__": [i for t in state.tasks for i in t.interrupts]}


def ran_once(files: NotesFiles, name: str, done: dict[str, Any]) -> None:
    """The note ``name`` was written once upstream, and the turn's last tool answer says ok."""
    assert len(files.runs(name=name)) == 1
    answers = [json.loads(m.content) for m in done["messages"] if isinstance(m, ToolMessage)]
    assert answers[-1]["status"] == "ok", answers


def asked(result: dict[str, Any]) -> list[dict[str, Any]]:
    (interrupt,) = result["__interrupt__"]
    return interrupt.value["confirmations"]


@pytest.mark.parametrize("mode", ["invoke", "stream", "ainvoke", "astream"])
async def test_the_turn_graph_holds_the_upstream_write_and_runs_it_once_on_resume(
    executor, upstream, mode
):
    files = upstream[1]
    name = f"graph-{mode}-{uuid.uuid4().hex[:6]}"
    graph = build_turn_graph(executor, script(name), checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": name}}
    (held,) = asked(await drive(graph, {"messages": [HumanMessage("save")]}, config, mode))
    assert held["tool"] == "notes.write_note"
    assert files.runs(name=name) == []  # held: nothing reached the upstream
    done = await drive(graph, Command(resume={held["confirmation_id"]: "approve"}), config, mode)
    assert not done.get("__interrupt__")
    ran_once(files, name, done)


def test_the_create_agent_middleware_holds_and_runs_the_upstream_write_once(executor, upstream):
    files = upstream[1]
    name = f"middleware-{uuid.uuid4().hex[:6]}"
    config = {"configurable": {"thread_id": name}}
    agent = create_agent(script(name), middleware=[TurnkitMiddleware(executor)],
                         checkpointer=InMemorySaver())  # fmt: skip
    (held,) = asked(agent.invoke({"messages": [HumanMessage("save")]}, config, context=ANN_TURN))
    assert files.runs(name=name) == []
    done = agent.invoke(Command(resume={held["confirmation_id"]: "approve"}), config,
                        context=ANN_TURN)  # fmt: skip
    ran_once(files, name, done)


def test_an_agent_sees_the_upstream_tools_and_confirms_the_write_once(executor, upstream):
    files = upstream[1]
    name = f"agent-{uuid.uuid4().hex[:6]}"
    with Agent(script(name), executor=executor, caller=ANN) as agent:
        first = agent.prompt("save a note")
        (pending,) = first.pending
        assert pending.tool == "notes.write_note"
        assert files.runs(name=name) == []
        agent.confirm({pending.id: "approve"})
    assert len(files.runs(name=name)) == 1


async def test_turnkits_mcp_door_reads_at_once_and_holds_the_upstream_write(executor, upstream):
    files = upstream[1]
    name = f"mcp-{uuid.uuid4().hex[:6]}"
    key, secret = executor.ledger.keys.create("ann", {"notes.tools:read", "notes.tools:write"})
    with uvicorn_serving(create_app(executor)) as url:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}) as http,
            Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
        ):
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert {"notes_read_note", "notes_write_note"} <= names
            read = await client.call_tool("notes_read_note", {"name": "welcome"})
            assert "hello from the notes server" in str(read.content)
            held = await client.call_tool("notes_write_note", {"name": name, "text": "t"})
    (pending,) = executor.pending()
    assert pending.id in str(held.content)
    assert files.runs(name=name) == []  # danger "always": a key's write waits too
    answer = await asyncio.to_thread(executor.decide, pending.id, key.caller, "approve")
    assert len(files.runs(name=name)) == 1, answer
