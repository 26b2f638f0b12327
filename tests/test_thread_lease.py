"""One writer per thread, within one process: a run holding a thread keeps every other run out, in
every run mode and on every backend, until it ends — however it ends.

The cross-process cases (two OS processes, a SIGKILLed holder, a stalled one) are in
``test_thread_lease_processes.py``; the ledger's lease rows and locks in ``test_ledger_leases.py``.

Reaches ``turnkit.threads`` and ``turnkit.graph.build`` directly: it tests the fenced saver, the
lease and the leased graph themselves, which no public name exposes.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_config
from langgraph.types import Command

from _modes import Turns
from turnkit import AgentBusy, Caller, LeaseLost, ThreadBusy
from turnkit.graph import TurnContext, build_turn_graph
from turnkit.storage import open_storage
from turnkit.testing import ScriptedModel
from turnkit.threads.fenced import FencedSaver
from turnkit.threads.leases import lease_of
from turnkit.threads.turn_graph import TurnGraph

ALICE = TurnContext(caller=Caller.session("alice"))
LIST = {"tool_calls": [{"name": "shop_list_products", "args": {}}]}
SET = {
    "tool_calls": [
        {"name": "shop_set_prices", "args": {"prices": [{"sku": "TEA-0001", "price": 1}]}}
    ]
}


@contextmanager
def holding(turns: Turns) -> Iterator[threading.Event]:
    """A run in another thread of this process that holds ``turns``' thread until the yielded
    event is set (its model waits for it), on its own storage (the same database)."""
    entered, go_on = threading.Event(), threading.Event()

    def waits(messages: Any, tools: Any) -> str:
        entered.set()
        assert go_on.wait(60)
        return "done waiting"

    model = ScriptedModel([waits])
    failure: list[BaseException] = []

    def run() -> None:
        try:
            if turns.backend == "memory":
                turns._memory = turns._memory or InMemorySaver()
                graph = build_turn_graph(
                    turns.executor(turns.ledger), model, checkpointer=turns._memory
                )
                graph.invoke({"messages": [("user", "hold it")]}, turns._config(), context=ALICE)
                return
            with open_storage(turns.backend) as storage:
                executor = turns.executor(storage.ledger)
                graph = build_turn_graph(executor, model, checkpointer=storage.checkpointer)
                graph.invoke({"messages": [("user", "hold it")]}, turns._config(), context=ALICE)
        except BaseException as exc:  # reported below
            failure.append(exc)
            entered.set()

    holder = threading.Thread(target=run)
    if turns.backend == "memory":
        turns._memory = turns._memory or InMemorySaver()
    holder.start()
    assert entered.wait(60)
    assert not failure, failure
    try:
        yield go_on
    finally:
        go_on.set()
        holder.join(60)
    assert not failure, failure


def test_a_second_run_on_a_busy_thread_fails_fast_then_runs_once_the_holder_is_done(turns):
    with holding(turns) as go_on:
        started = time.monotonic()
        with pytest.raises(ThreadBusy) as busy:
            turns.send(ScriptedModel(["never asked"]), {"messages": [("user", "me too")]}, ALICE)
        assert time.monotonic() - started < 10  # at once, not after some timeout
        assert busy.value.thread_id == turns.thread
        assert busy.value.holder
        assert "#" in busy.value.holder
        assert "busy_timeout" in str(busy.value)
        go_on.set()
    model = ScriptedModel([LIST, "Three products."])
    outcome = turns.send(model, {"messages": [("user", "list them")]}, ALICE)
    model.assert_done()
    texts = [m.content for m in outcome.messages if m.type == "ai" and m.content]
    assert texts == ["done waiting", "Three products."]  # the refused run left nothing


def test_a_run_paused_at_a_held_write_gives_the_thread_back_and_the_resume_takes_it(turns):
    paused = turns.send(ScriptedModel([SET]), {"messages": [("user", "set it")]}, ALICE)
    [held] = paused.confirmations
    # the thread is free while the write waits for a person: another run may take it
    resumed = turns.send(
        ScriptedModel(["Price set."]), Command(resume={held["confirmation_id"]: "approve"}), ALICE
    )
    assert resumed.messages[-1].content == "Price set."
    assert not resumed.interrupts


def test_a_run_that_fails_gives_the_thread_back(turns):
    def broken(messages: Any, tools: Any) -> str:
        raise RuntimeError("the model broke")

    with pytest.raises(RuntimeError, match="the model broke"):
        turns.send(ScriptedModel([broken]), {"messages": [("user", "hi")]}, ALICE)
    outcome = turns.send(ScriptedModel(["Fine now."]), {"messages": [("user", "hi")]}, ALICE)
    assert outcome.messages[-1].content == "Fine now."


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_run_with_a_busy_timeout_waits_for_the_holder(mode, tmp_path, shop, rights):
    from turnkit import Executor, Registry

    url = str(tmp_path / "wait.sqlite")
    with open_storage(url) as storage:
        storage.ledger.set_setting("api_session_write_modules", ["shop"])
    turns = Turns(
        url, "invoke", lambda ledger: Executor(Registry([shop]), ledger=ledger, permissions=rights)
    )
    config = {"configurable": {"thread_id": turns.thread, "busy_timeout": 30}}
    with holding(turns) as go_on:
        threading.Timer(0.5, go_on.set).start()
        with open_storage(url) as storage:
            graph = build_turn_graph(
                turns.executor(storage.ledger),
                ScriptedModel(["After you."]),
                checkpointer=storage.checkpointer,
            )
            request = {"messages": [("user", "waiting")]}
            if mode == "sync":
                out = graph.invoke(request, config, context=ALICE)
            else:
                out = asyncio.run(_ainvoke_on(url, turns, request, config))
    assert out["messages"][-1].content == "After you."


async def _ainvoke_on(url: str, turns: Turns, request: Any, config: Any) -> Any:
    from turnkit.storage import open_async_storage

    async with open_async_storage(url) as storage:
        graph = build_turn_graph(
            turns.executor(storage.ledger),
            ScriptedModel(["After you."]),
            checkpointer=storage.checkpointer,
        )
        return await graph.ainvoke(request, config, context=ALICE)


def test_a_graph_built_with_a_busy_timeout_waits_and_one_without_does_not(tmp_path, shop, rights):
    from turnkit import Executor, Registry

    url = str(tmp_path / "wait.sqlite")
    turns = Turns(
        url, "invoke", lambda ledger: Executor(Registry([shop]), ledger=ledger, permissions=rights)
    )
    with holding(turns) as go_on, open_storage(url) as storage:
        executor = turns.executor(storage.ledger)
        impatient = build_turn_graph(executor, ScriptedModel([]), checkpointer=storage.checkpointer)
        with pytest.raises(ThreadBusy):
            impatient.invoke({"messages": [("user", "now")]}, turns._config(), context=ALICE)
        patient = build_turn_graph(
            executor, ScriptedModel(["Waited."]), checkpointer=storage.checkpointer, busy_timeout=30
        )
        threading.Timer(0.3, go_on.set).start()
        out = patient.invoke({"messages": [("user", "later")]}, turns._config(), context=ALICE)
    assert out["messages"][-1].content == "Waited."


def test_state_updates_take_the_lease_too(tmp_path, shop, rights):
    from turnkit import Executor, Registry

    url = str(tmp_path / "update.sqlite")
    turns = Turns(
        url, "invoke", lambda ledger: Executor(Registry([shop]), ledger=ledger, permissions=rights)
    )
    with holding(turns), open_storage(url) as storage:
        graph = build_turn_graph(
            turns.executor(storage.ledger), ScriptedModel([]), checkpointer=storage.checkpointer
        )
        with pytest.raises(ThreadBusy):
            graph.update_state(turns._config(), {"messages": [("user", "sneaked in")]})
    with open_storage(url) as storage:
        graph = build_turn_graph(
            turns.executor(storage.ledger), ScriptedModel([]), checkpointer=storage.checkpointer
        )
        graph.update_state(turns._config(), {"messages": [("user", "after the run")]})
        assert graph.get_state(turns._config()).values["messages"][-1].content == "after the run"


def test_an_agent_on_a_busy_thread_raises_agent_busy(tmp_path, shop, rights):
    from turnkit import Agent, Executor, Registry

    url = str(tmp_path / "agent.sqlite")
    turns = Turns(
        url, "invoke", lambda ledger: Executor(Registry([shop]), ledger=ledger, permissions=rights)
    )
    agent = Agent(ScriptedModel([]), storage=url, thread_id=turns.thread, tools=[])
    with holding(turns), agent, pytest.raises(AgentBusy) as busy:
        agent.prompt("hello?")
    assert isinstance(busy.value, ThreadBusy)
    assert busy.value.thread_id == turns.thread
    assert "another process" in str(busy.value)


def test_a_run_that_lost_its_lease_writes_no_further_checkpoint(tmp_path, shop, rights):
    """The lease is taken over mid-run (as when its holder stalled past the expiry): the run's
    next checkpoint write is refused, and the thread's chain is the new holder's."""
    from turnkit import Executor, Registry

    url = str(tmp_path / "lost.sqlite")
    with open_storage(url) as storage:
        executor = Executor(Registry([shop]), ledger=storage.ledger, permissions=rights)

        def steal(messages: Any, tools: Any) -> str:
            lease = lease_of(get_config())
            assert lease is not None
            assert lease.thread_id == "t"
            # the run stalls past its lease's expiry (its renewer stalled with it)...
            lease.deadline = time.monotonic() - 1
            storage.ledger._run(
                "UPDATE turnkit_thread_leases SET expires_at = 1 WHERE thread_id = ?", ("t",)
            )
            # ...and another run takes the thread meanwhile
            assert storage.ledger.thread_leases().take("t") is not None
            return "too late"

        graph = build_turn_graph(
            executor, ScriptedModel([steal]), checkpointer=storage.checkpointer
        )
        before = len(list(storage.checkpointer.list({"configurable": {"thread_id": "t"}})))
        with pytest.raises(LeaseLost, match="lost its lease"):
            graph.invoke(
                {"messages": [("user", "hi")]}, {"configurable": {"thread_id": "t"}}, context=ALICE
            )
        after = list(storage.checkpointer.list({"configurable": {"thread_id": "t"}}))
        assert all("too late" not in str(c.checkpoint) for c in after)
        assert len(after) >= before


def test_a_server_attached_checkpointer_is_fenced(tmp_path, shop, rights):
    """``langgraph dev`` copies the graph with its own checkpointer: the copy is still a
    ``TurnGraph`` and its runs take leases."""
    from turnkit import Executor, Registry
    from turnkit.graph import builder
    from turnkit.graph.build import leased

    executor = Executor(Registry([shop]), permissions=rights)
    graph = leased(builder(executor, ScriptedModel([])).compile(), executor.ledger.thread_leases())
    assert graph.checkpointer is None
    saver = InMemorySaver()
    served = graph.copy(update={"checkpointer": saver})
    assert isinstance(served, TurnGraph)
    assert isinstance(served.checkpointer, FencedSaver)
    assert served.checkpointer.saver is saver
    assert served.with_config({"tags": ["x"]}).checkpointer is served.checkpointer  # not re-wrapped
    executor.close()


def test_an_in_process_saver_writes_straight_through(shop, rights, monkeypatch):
    """``InMemorySaver``: its threads' leases live in this process's memory and end only with
    their runs, so its writes are neither fenced nor deferred (the lease is still taken: a
    second run of a busy thread is refused, see above)."""
    from turnkit import Executor, Registry
    from turnkit.threads import fenced as fenced_module
    from turnkit.threads.fenced import InProcessSaver

    def refuse(config: Any) -> None:
        raise AssertionError("an in-process saver's write was fenced")

    monkeypatch.setattr(fenced_module, "fence_run", refuse)
    monkeypatch.setattr(fenced_module, "afence_run", refuse)
    executor = Executor(Registry([shop]), permissions=rights)
    saver = InMemorySaver()
    graph = build_turn_graph(executor, ScriptedModel(["Hello."]), checkpointer=saver)
    assert isinstance(graph.checkpointer, InProcessSaver)
    config = {"configurable": {"thread_id": "memory"}}
    graph.invoke({"messages": [("user", "hi")]}, config, context=ALICE)
    assert len(list(saver.list(config))) == 4  # one a step: input, start, list_tools, call_model
    executor.close()


def test_the_fenced_saver_passes_on_every_method_of_a_langgraph_saver():
    """An upgrade that gives ``BaseCheckpointSaver`` a new method fails here: the wrapper would
    otherwise answer it with the base class's default instead of the wrapped saver's own."""
    public = {
        name
        for name, value in vars(BaseCheckpointSaver).items()
        if not name.startswith("_") and (callable(value) or isinstance(value, property))
    }
    missing = {name for name in public if name not in vars(FencedSaver)}
    assert not missing, f"FencedSaver does not pass on: {sorted(missing)}"


def test_a_durable_checkpointer_with_an_executors_temporary_ledger_is_warned_about(
    tmp_path, caplog
):
    """The lease lives in the executor's ledger: a temporary one covers this process only."""
    from turnkit import Executor, Registry

    with open_storage(tmp_path / "t.sqlite") as storage:
        with caplog.at_level("WARNING", logger="turnkit.graph"):
            build_turn_graph(
                Executor(Registry([])), ScriptedModel([]), checkpointer=storage.checkpointer
            )
        assert "ledger=storage.ledger" in caplog.text
        caplog.clear()
        with caplog.at_level("WARNING", logger="turnkit.graph"):
            executor = Executor(Registry([]), ledger=storage.ledger)
            build_turn_graph(executor, ScriptedModel([]), checkpointer=storage.checkpointer)
            build_turn_graph(
                Executor(Registry([])), ScriptedModel([]), checkpointer=InMemorySaver()
            )
        assert caplog.text == ""


@pytest.mark.parametrize("wait", ["30", -1, True, float("nan")])
def test_a_busy_timeout_that_is_not_a_number_of_seconds_is_refused_clearly(wait, tmp_path):
    from turnkit import Executor, Registry

    with open_storage(tmp_path / "t.sqlite") as storage:
        executor = Executor(Registry([]), ledger=storage.ledger)
        graph = build_turn_graph(executor, ScriptedModel([]), checkpointer=storage.checkpointer)
        config = {"configurable": {"thread_id": "t", "busy_timeout": wait}}
        with pytest.raises(ValueError, match="busy_timeout must be a number of seconds"):
            graph.invoke({"messages": [("user", "hi")]}, config, context=ALICE)


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_turn_obeys_the_settings_read_with_its_lease(backend, mode, tmp_path, shop, rights):
    """On PostgreSQL the run's settings come with its lease (one round trip for both); on SQLite
    ``list_tools`` reads them. Either way the operator's change made before the run holds."""
    from conftest import postgres_url
    from turnkit import Executor, Registry
    from turnkit.storage import open_async_storage

    url = str(tmp_path / "s.sqlite") if backend == "sqlite" else postgres_url()
    model = ScriptedModel([LIST, LIST])
    config = {"configurable": {"thread_id": "rounds"}}

    def graph_on(storage: Any) -> Any:
        storage.ledger.set_setting("max_rounds", 1)
        if backend == "postgres":  # the lease brings them: a second read would be a round trip

            def no_second_read() -> Any:
                raise AssertionError("list_tools read the settings again")

            storage.ledger.settings = no_second_read
        executor = Executor(Registry([shop]), ledger=storage.ledger, permissions=rights)
        return build_turn_graph(executor, model, checkpointer=storage.checkpointer)

    if mode == "invoke":
        with open_storage(url) as storage:
            final = graph_on(storage).invoke({"messages": [("user", "go")]}, config, context=ALICE)
    else:

        async def main() -> Any:
            async with await open_async_storage(url) as storage:
                graph = await asyncio.to_thread(graph_on, storage)
                return await graph.ainvoke({"messages": [("user", "go")]}, config, context=ALICE)

        final = asyncio.run(main())
    assert "stopped after 1 round" in final["messages"][-1].content
    assert len(model.calls) == 1
