"""Many Agents in one process against a keep-alive HTTP/1.1 server (what OpenAI, vLLM, llama.cpp
and Ollama are): one after another, side by side, from threads and from the user's own event
loop, and through ``AgentPool``. Every Agent runs its turns on one loop that outlives them all, and
talks through turnkit's own HTTP client (a pool per loop), never langchain-openai's process-wide
one: the application may await the same ``ChatOpenAI`` on its own loop in between."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest
from langchain_openai import ChatOpenAI

from _openai_server import OpenAIServer
from turnkit import Agent, AgentPool, ModelError, chat

pytestmark = pytest.mark.usefixtures("no_openai_environment")


def agent(server: OpenAIServer, *, streaming: bool = False) -> Agent:
    if streaming:
        model = ChatOpenAI(model="m", base_url=server.url, api_key="t", use_responses_api=False,
                           streaming=True)  # fmt: skip
        return Agent(model)
    return Agent("openai:test-model", base_url=server.url)


@pytest.mark.parametrize("streaming", [False, True], ids=["plain", "streaming"])
def test_a_second_agent_after_the_first_is_closed_works(server, streaming):
    server.script("one", "two", "three")
    first = agent(server, streaming=streaming)
    assert first.prompt("hi").content == "one"
    first.close()
    second = agent(server, streaming=streaming)
    assert second.prompt("hi").content == "two"
    second.close()
    with agent(server, streaming=streaming) as third:
        assert third.prompt("hi").content == "three"
    assert len(server.connections) < len(server.requests)  # connections were kept alive


def test_agents_open_side_by_side_take_turns(server):
    server.script(*[f"r{i}" for i in range(6)])
    agents = [agent(server) for _ in range(3)]
    answers = [a.prompt("hi").content for a in agents + agents]
    assert sorted(answers) == sorted(f"r{i}" for i in range(6))
    for a in agents:
        a.close()


def test_agents_prompted_at_once_from_threads(server):
    server.script(*["ok"] * 8)
    agents = [agent(server) for _ in range(8)]
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda a: a.prompt("hi").content, agents))
    assert answers == ["ok"] * 8
    for a in agents:
        a.close()


def test_aprompt_from_the_users_own_loops(server):
    server.script(*["ok"] * 6)

    async def three() -> list[str]:
        agents = [agent(server) for _ in range(3)]
        try:
            done = await asyncio.gather(*(a.aprompt("hi") for a in agents))
            return [r.content for r in done]
        finally:
            for a in agents:
                a.close()

    assert asyncio.run(three()) == ["ok"] * 3
    assert asyncio.run(three()) == ["ok"] * 3  # a new loop of the user's, new agents


def test_an_agent_pool_serves_many_named_agents(server):
    server.script(*["ok"] * 6)
    pool = AgentPool()
    for name in ["a", "b", "c", "a", "b", "c"]:
        assert pool.get(name, lambda: agent(server)).prompt("hi").content == "ok"
    assert pool.names() == ["a", "b", "c"]
    for name in pool.names():
        pool.drop(name)


def test_chat_calls_one_after_another(server):
    server.script("one", "two")
    assert chat("hi", model="openai:test-model", base_url=server.url).content == "one"
    assert chat("hi", model="openai:test-model", base_url=server.url).content == "two"


@pytest.mark.parametrize("streaming", [False, True], ids=["plain", "streaming"])
def test_the_application_awaits_its_model_on_its_loop_and_an_agent_on_the_same_model(
    server, streaming
):
    server.script("direct", "agent", "direct again", "agent again")
    model = ChatOpenAI(model="m", base_url=server.url, api_key="t", use_responses_api=False,
                       streaming=streaming)  # fmt: skip

    async def mixed() -> list[str]:
        answers = [(await model.ainvoke("hi")).content]
        with Agent(model) as agent:  # no storage: closing does not block
            answers.append((await agent.aprompt("hi")).content)
            answers.append((await model.ainvoke("hi")).content)
            answers.append((await agent.aprompt("hi")).content)
        return answers

    assert asyncio.run(mixed()) == ["direct", "agent", "direct again", "agent again"]


def test_a_client_of_the_applications_own_used_on_two_loops_fails_as_model_error(server):
    server.script("direct", "agent")
    client = openai.DefaultAsyncHttpxClient()
    model = ChatOpenAI(model="m", base_url=server.url, api_key="t", use_responses_api=False,
                       streaming=True, http_async_client=client)  # fmt: skip

    async def mixed() -> Exception | None:
        assert (await model.ainvoke("hi")).content == "direct"
        with Agent(model) as agent:  # the Agent keeps a client it was given
            try:
                await agent.aprompt("hi")
            except Exception as exc:
                return exc
        return None

    failure = asyncio.run(mixed())  # the pooled connection belongs to the first loop
    assert isinstance(failure, ModelError), failure  # not a bare RuntimeError
    assert "used from another event loop" in str(failure)
    assert "Agent('openai:<model>', base_url=...)" in str(failure)
