"""Many Agents in one process against a keep-alive HTTP/1.1 server (what OpenAI, vLLM, llama.cpp
and Ollama are): one after another, side by side, from threads and from the user's own event
loop, and through ``AgentPool``. langchain-openai keeps one async HTTP client per process, so every
Agent must run on one loop that outlives them all."""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor

import pytest
from langchain_openai import ChatOpenAI

from _openai_server import OpenAIServer
from turnkit import Agent, AgentPool, chat


@pytest.fixture(autouse=True)
def _no_openai_environment(monkeypatch):
    for name in [n for n in os.environ if n.startswith("OPENAI_")]:
        monkeypatch.delenv(name)


@pytest.fixture
def server():
    with OpenAIServer() as running:
        yield running
    running.assert_done()


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
