"""The loop every Agent runs its turns on (``turnkit.agent._portal``), seen from the Agent.

An interrupted ``prompt`` or a cancelled ``aprompt`` cancels its turn and waits for it before it
returns; a blocking call from turnkit's own loop (an async tool handler) is refused with what to do
instead, not deadlocked; an Agent made before ``os.fork`` answers in the child; ``aclose`` and
``async with`` never block the caller's event loop.

Reaches ``turnkit.agent._portal`` directly: it tests the portal's own behaviour, which no public
name exposes.
"""

from __future__ import annotations

import asyncio
import gc
import os
import select
import signal
import threading
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from turnkit import Agent, AgentBusy, tool
from turnkit.agent._portal import Portal
from turnkit.testing import ScriptedModel

WAIT = 60.0
"""The bound of every wait on another thread or process."""


def calls(name: str, **args: Any) -> dict[str, Any]:
    """A scripted reply calling the tool ``name`` with ``args``."""
    return {"tool_calls": [{"name": name, "args": args}]}


class Stuck:
    """``wait_here``: an async tool that says when it started, then waits until cancelled and
    says that too."""

    def __init__(self) -> None:
        self.entered, self.cancelled = threading.Event(), threading.Event()

        @tool(read_only=True)
        async def wait_here(city: str) -> str:
            """Waits until its turn is cancelled."""
            self.entered.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
            return city

        self.tool = wait_here


@pytest.fixture
def stuck() -> Stuck:
    return Stuck()


# --- interrupted and cancelled waits ------------------------------------------------------------


@pytest.fixture
def interrupt_main() -> Iterator[Any]:
    """A function that raises ``KeyboardInterrupt`` in the main thread (as Ctrl-C does), through a
    signal of the test's own so that the runner's SIGINT handling is not involved."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")

    def raise_interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGUSR1, raise_interrupt)
    main = threading.main_thread().ident
    assert main is not None
    try:
        yield lambda: signal.pthread_kill(main, signal.SIGUSR1)
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_an_interrupted_prompt_cancels_its_turn_before_it_returns(stuck, interrupt_main):
    model = ScriptedModel([calls("wait_here", city="Lisbon"), "Asked again."])
    with Agent(model, tools=[stuck.tool]) as agent:

        def interrupt_once_the_turn_runs() -> None:
            assert stuck.entered.wait(WAIT), "the turn never reached the tool"
            interrupt_main()

        interrupter = threading.Thread(target=interrupt_once_the_turn_runs)
        interrupter.start()
        with pytest.raises(KeyboardInterrupt):
            agent.prompt("Lisbon?", timeout=WAIT)
        interrupter.join(WAIT)
        assert stuck.cancelled.is_set()  # the turn was over before the interruption went on
        assert agent.prompt("Never mind.").content == "Asked again."
    model.assert_done()


async def test_a_cancelled_aprompt_cancels_its_turn_before_it_returns(stuck):
    model = ScriptedModel([calls("wait_here", city="Lisbon"), "Asked again."])
    with Agent(model, tools=[stuck.tool]) as agent:  # no storage: closing it does not block
        running = asyncio.ensure_future(agent.aprompt("Lisbon?", timeout=WAIT))
        assert await asyncio.to_thread(stuck.entered.wait, WAIT), "the turn never ran the tool"
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        assert stuck.cancelled.is_set()
        assert (await agent.aprompt("Never mind.")).content == "Asked again."
    model.assert_done()


# --- agents inside tools ------------------------------------------------------------------------


def test_a_blocking_prompt_inside_an_async_tool_is_refused_saying_to_await_aprompt():
    inner = Agent(ScriptedModel([]))
    refused: list[BaseException] = []

    @tool(read_only=True)
    async def ask_helper(question: str) -> str:
        """Ask the helper agent."""
        try:
            return inner.prompt(question).content
        except AgentBusy as exc:
            refused.append(exc)
            return "the helper could not be asked"

    model = ScriptedModel([calls("ask_helper", question="q"), "Done."])
    with warnings.catch_warnings(record=True) as caught, Agent(model, tools=[ask_helper]) as outer:
        warnings.simplefilter("always")
        assert outer.prompt("Go.").content == "Done."
        gc.collect()
    (error,) = refused
    assert "await agent.aprompt(...)" in str(error)
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []
    inner.close()


def test_an_async_tool_awaits_another_agents_aprompt_and_a_plain_tool_calls_prompt():
    inner = Agent(ScriptedModel(["inner says hi", "inner says hello"]))

    @tool(read_only=True)
    async def ask_async(question: str) -> str:
        """Ask the helper agent, awaiting it."""
        return (await inner.aprompt(question)).content

    @tool(read_only=True)
    def ask_plain(question: str) -> str:
        """Ask the helper agent from a worker thread."""
        return inner.prompt(question).content

    model = ScriptedModel(
        [calls("ask_async", question="q"), calls("ask_plain", question="q"), "Done."]
    )
    with Agent(model, tools=[ask_async, ask_plain]) as outer:
        assert outer.prompt("Go.").content == "Done."
    answers = [m.content for m in model.calls[2]["messages"] if m.type == "tool"]
    assert ['"inner says hi"' in a for a in answers] == [True, False]
    assert ['"inner says hello"' in a for a in answers] == [False, True]
    inner.close()


# --- fork ---------------------------------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
def test_an_agent_made_before_a_fork_answers_in_the_child():
    model = ScriptedModel(["in the parent", "in the child"])
    agent = Agent(model)
    assert agent.prompt("Hi.").content == "in the parent"
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: answer through the pipe, never return into pytest
        status = 1
        try:
            signal.alarm(int(WAIT))  # a hung child dies rather than waits forever
            os.write(write, agent.prompt("Hi.", timeout=WAIT / 2).content.encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write)
    answer = None
    try:
        ready, _, _ = select.select([read], [], [], WAIT)
        answer = os.read(read, 1000).decode() if ready else None
    finally:
        os.close(read)
        if answer is None:  # hung: end it, and fail below rather than wait forever
            os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    assert answer == "in the child", "the child hung or failed (no answer within the bound)"
    assert os.waitstatus_to_exitcode(status) == 0
    agent.close()


# --- closing from async code --------------------------------------------------------------------


async def test_async_with_closes_the_agent_and_its_storage_without_a_blocking_wait(
    tmp_path, monkeypatch
):
    path = str(tmp_path / "agent.sqlite")
    model = ScriptedModel(["Hello Alice.", "Your name is Alice."])
    opened = await asyncio.to_thread(Agent, model, storage=path)  # opening blocks briefly

    def blocking_wait(self: Portal, coroutine: Any) -> Any:
        coroutine.close()
        raise AssertionError("a blocking wait on the caller's event loop")

    with monkeypatch.context() as patched:
        patched.setattr(Portal, "run", blocking_wait)
        async with opened as agent:
            assert (await agent.aprompt("My name is Alice.")).content == "Hello Alice."
        await agent.aclose()  # again: nothing happens
    with pytest.raises(RuntimeError, match="this agent is closed"):
        await agent.aprompt("Hi.")
    again = await asyncio.to_thread(Agent, model, storage=path, thread_id=agent.thread_id)
    async with again:
        assert (await again.aprompt("What is my name?")).content == "Your name is Alice."
    assert [m.type for m in model.calls[1]["messages"]] == ["human", "ai", "human"]
