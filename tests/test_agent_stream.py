"""``Agent.stream`` / ``Agent.astream``: LangGraph's chunks as the turn runs ("updates" after each
step, "messages" token by token), then the same ``Response`` as ``prompt``, held writes in
``pending`` and resumed with ``confirm``; leaving the loop early cancels the turn."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk

from _openai_server import call, reply
from turnkit import Agent, AgentBusy, tool
from turnkit.testing import ScriptedModel

STEPS = ["list_tools", "call_model", "validate_args", "execute", "fit_results"]


@tool(danger="always")
def delete_note(note_id: str) -> str:
    "Delete a note."
    return f"deleted {note_id}"


@tool(read_only=True)
def get_note(note_id: str) -> str:
    "Read a note."
    return f"note {note_id}: buy tea"


def _deleting() -> ScriptedModel:
    first = AIMessage(
        "", tool_calls=[{"name": "delete_note", "args": {"note_id": "n1"}, "id": "c1"}]
    )
    return ScriptedModel([first, "Deleted."])


def test_stream_gives_each_steps_update_then_the_held_write_as_prompt_does():
    with Agent(_deleting(), tools=[delete_note]) as agent:
        stream = agent.stream("delete n1")
        updates = list(stream)
        assert [next(iter(u)) for u in updates] == [*STEPS, "__interrupt__"]
        (interrupt,) = updates[-1]["__interrupt__"]
        (pending,) = stream.response.pending
        assert interrupt.value["confirmations"][0]["confirmation_id"] == pending.id
        assert pending.tool == "local.delete_note"
        assert pending.arguments == {"note_id": "n1"}
        assert stream.response.content == ""
        done = agent.confirm({pending.id: "approve"})
    assert done.content == "Deleted."


async def test_astream_gives_the_same_updates_and_response():
    async with Agent(_deleting(), tools=[delete_note]) as agent:
        stream = agent.astream("delete n1")
        updates = [update async for update in stream]
        assert [next(iter(u)) for u in updates] == [*STEPS, "__interrupt__"]
        (pending,) = stream.response.pending
        done = await agent.aconfirm({pending.id: "approve"})
    assert done.content == "Deleted."


@pytest.fixture
def openai_agent(server, no_openai_environment):
    """An Agent on ChatOpenAI over HTTP: the scripted server streams text in pieces."""
    server.script(
        reply(tool_calls=[call("get_note", {"note_id": "n1"})]), reply("You must buy tea.")
    )
    with Agent("openai:fake-model", base_url=server.url, tools=[get_note]) as agent:
        yield agent


def _tokens(chunks: list) -> list[str]:
    return [m.content for m, meta in chunks if meta["langgraph_node"] == "call_model" and m.content]


def test_stream_messages_gives_the_models_tokens_as_they_come(openai_agent):
    stream = openai_agent.stream("what is on note n1?", stream_mode="messages")
    chunks = list(stream)
    assert all(isinstance(c, tuple) and len(c) == 2 for c in chunks)
    assert isinstance(chunks[0][0], AIMessageChunk)
    tokens = _tokens(chunks)
    assert len(tokens) > 1  # streamed in pieces, not one message at the end
    assert "".join(tokens) == "You must buy tea."
    assert stream.response.content == "You must buy tea."
    assert stream.response.tool_calls[0].answer["result"] == "note n1: buy tea"


async def test_astream_of_several_modes_gives_mode_and_chunk_pairs(openai_agent):
    stream = openai_agent.astream("what is on note n1?", stream_mode=["updates", "messages"])
    pairs = [pair async for pair in stream]
    assert {mode for mode, _ in pairs} == {"updates", "messages"}
    assert "".join(_tokens([c for mode, c in pairs if mode == "messages"])) == "You must buy tea."
    steps = [next(iter(c)) for mode, c in pairs if mode == "updates"]
    assert steps == [*STEPS, "call_model"]
    assert stream.response.content == "You must buy tea."


@pytest.fixture
def stuck() -> Iterator[tuple[dict[str, Any], threading.Event]]:
    """Agent arguments for a turn whose one tool call waits for the event, and the event; the
    model answers "never" to the next prompt."""
    release = threading.Event()

    @tool(read_only=True)
    def slow_note(note_id: str) -> str:
        "Read a slow note."
        release.wait(5)
        return "late"

    calls = [{"name": "slow_note", "args": {"note_id": "n1"}, "id": "c1"}]
    model = ScriptedModel([AIMessage("", tool_calls=calls), "never"])
    yield {"model": model, "tools": [slow_note]}, release
    release.set()


def test_leaving_the_loop_early_cancels_the_turn_and_frees_the_agent(stuck):
    arguments, release = stuck
    with Agent(**arguments) as agent:
        stream = agent.stream("slow")
        for update in stream:
            if "validate_args" in update:
                break  # the tool runs (and waits) now: the turn is cancelled as we leave
        release.set()
        with pytest.raises(RuntimeError, match="iterated to its end"):
            stream.response  # noqa: B018  (the property raises)
        assert agent.prompt("again", timeout=5).content == "never"


def test_a_stream_runs_its_turn_once_and_is_refused_while_another_prompt_runs():
    with Agent(ScriptedModel(["one", "two"])) as agent:
        stream = agent.stream("hi")
        assert [next(iter(u)) for u in stream] == ["list_tools", "call_model"]
        with pytest.raises(RuntimeError, match="runs its turn once"):
            list(stream)
        again = agent.stream("again")
        running = iter(again)
        assert "list_tools" in next(running)  # the turn runs now, and holds the agent
        with pytest.raises(AgentBusy):
            agent.prompt("meanwhile")
        assert [next(iter(u)) for u in running] == ["call_model"]
        assert again.response.content == "two"


def test_an_unknown_stream_mode_is_refused_naming_langgraphs():
    with Agent(ScriptedModel([])) as agent, pytest.raises(ValueError, match="'updates'"):
        agent.stream("hi", stream_mode="tokens")


async def test_aclose_after_leaving_an_async_loop_early_frees_the_agent_at_once(stuck):
    arguments, release = stuck
    async with Agent(**arguments) as agent:
        stream = agent.astream("slow")
        async for update in stream:
            if "validate_args" in update:
                break
        await stream.aclose()
        release.set()
        assert (await agent.aprompt("again", timeout=5)).content == "never"


def test_a_sync_stream_inside_an_async_tool_is_refused_saying_to_use_astream():
    inner = Agent(ScriptedModel([]))
    refused: list[BaseException] = []

    @tool(read_only=True)
    async def ask_helper(question: str) -> str:
        """Ask the helper agent."""
        try:
            return str(list(inner.stream(question)))
        except AgentBusy as exc:
            refused.append(exc)
            return "the helper could not be asked"

    calls = [{"name": "ask_helper", "args": {"question": "q"}, "id": "c1"}]
    model = ScriptedModel([AIMessage("", tool_calls=calls), "Done."])
    with Agent(model, tools=[ask_helper]) as outer:
        assert outer.prompt("Go.").content == "Done."
    (error,) = refused
    assert "agent.astream(...)" in str(error)
    inner.close()
