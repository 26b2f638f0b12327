"""A step saved in one transaction: on ``turnkit.storage``'s savers a leased run's task writes wait
for the checkpoint that follows them and are committed with it (``FencedSaver``, ``batched``).

What must not change is checked against LangGraph's own saver class on the same database: the
thread's whole history (every checkpoint, every task's saved result), an interrupt's state, and a
failed parallel step whose finished sibling is not run again. What must change is counted: the
transactions a turn commits. The crash tests (``test_crash_safety.py``) kill a process inside the
batched save.
"""

from __future__ import annotations

import asyncio
import operator
import re
import sqlite3
import threading
import time
from collections.abc import Iterator
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import HumanMessage
from langgraph.graph import START, StateGraph
from langgraph.types import Command, interrupt

from conftest import postgres_url
from turnkit import Caller, Executor, Registry, StaticPermissions
from turnkit.graph import TurnContext, build_turn_graph, with_thread_leases
from turnkit.storage import open_storage
from turnkit.testing import ScriptedModel

ALICE = TurnContext(caller=Caller.session("alice"))
LIST = {"tool_calls": [{"name": "shop_list_products", "args": {}}]}
SET = {
    "tool_calls": [
        {"name": "shop_set_prices", "args": {"prices": [{"sku": "TEA-0001", "price": 1}]}}
    ]
}


@pytest.fixture
def storage(ledger_url) -> Iterator[Any]:
    with open_storage(ledger_url) as opened:
        opened.ledger.set_setting("api_session_write_modules", ["shop"])
        yield opened


def langgraph_saver(storage: Any) -> Any:
    """LangGraph's own saver class on the storage's connection: what a user would bring."""
    cls = next(
        c for c in type(storage.checkpointer).__mro__ if c.__module__.startswith("langgraph.")
    )
    assert cls.__name__ in ("SqliteSaver", "PostgresSaver")
    return cls(storage.checkpointer.conn)


def turn_graph(storage: Any, shop: Any, saver: Any, steps: list[Any]) -> Any:
    rights = StaticPermissions({"alice": {"shop.view", "shop.manage"}})
    executor = Executor(Registry([shop]), ledger=storage.ledger, permissions=rights)
    return build_turn_graph(executor, ScriptedModel(steps), checkpointer=saver)


def history(graph: Any, thread: str) -> list[tuple[Any, ...]]:
    """Every checkpoint of the thread, oldest first: its step, what runs next, and each task's
    name and saved result (message ids and times left out: they differ between runs)."""
    shown = []
    for snapshot in reversed(list(graph.get_state_history(_config(thread)))):
        tasks = tuple((task.name, _plain(task.result)) for task in snapshot.tasks)
        shown.append((snapshot.metadata["step"], snapshot.next, tasks))
    return shown


IDS = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{8,32}")
"""Ids and keys made fresh by each run (uuids, tool call ids, message ids)."""


def _plain(value: Any) -> str:
    return IDS.sub("<id>", repr(value))


def _config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def test_a_turn_saves_the_same_history_as_langgraphs_saver(storage, shop):
    ours = turn_graph(storage, shop, storage.checkpointer, [LIST, "Here they are."])
    theirs = turn_graph(storage, shop, langgraph_saver(storage), [LIST, "Here they are."])
    for graph, thread in ((ours, "ours"), (theirs, "theirs")):
        graph.invoke({"messages": [HumanMessage("list")]}, _config(thread), context=ALICE)

    saved = history(ours, "ours")
    assert saved == history(theirs, "theirs")
    assert len(saved) == 8  # the input, then one checkpoint per step
    assert all(result is not None for _, _, tasks in saved[:-1] for _, result in tasks)
    assert ours.get_state(_config("ours")).values["messages"][-1].content == "Here they are."


def test_a_held_write_pauses_and_resumes_as_on_langgraphs_saver(storage, shop):
    ours = turn_graph(storage, shop, storage.checkpointer, [SET, "Done."])
    theirs = turn_graph(storage, shop, langgraph_saver(storage), [SET, "Done."])
    for graph, thread in ((ours, "ours"), (theirs, "theirs")):
        graph.invoke({"messages": [HumanMessage("cheaper")]}, _config(thread), context=ALICE)
        state = graph.get_state(_config(thread))
        assert state.next == ("await_confirmation",)
        (held,) = state.interrupts[0].value["confirmations"]
        resume = Command(resume={held["confirmation_id"]: "approve"})
        graph.invoke(resume, _config(thread), context=ALICE)

    assert history(ours, "ours") == history(theirs, "theirs")
    assert len(shop.writes()) == 2  # one per thread


def test_a_turn_commits_one_transaction_a_step(storage, shop, ledger_url):
    """LangGraph's saver commits a step's task writes and its checkpoint apart; turnkit's saves
    them together: at least one commit fewer for each of the turn's six steps."""
    ours = turn_graph(storage, shop, storage.checkpointer, [LIST, "ok"] * 10)
    theirs = turn_graph(storage, shop, langgraph_saver(storage), [LIST, "ok"] * 10)
    count = commits(storage, ledger_url)
    spent = {}
    for name, graph in (("ours", ours), ("theirs", theirs)):
        before = count()
        for i in range(5):
            graph.invoke({"messages": [HumanMessage("list")]}, _config(f"{name}{i}"), context=ALICE)
        spent[name] = (count() - before) / 5
    assert spent["ours"] <= spent["theirs"] - 6, spent


def commits(storage: Any, ledger_url: str) -> Any:
    """A function giving the write transactions committed so far: on the saver's SQLite
    connection, or by PostgreSQL (each takes a transaction id; none else writes meanwhile)."""
    if "postgresql" not in ledger_url:
        seen = [0]
        conn: sqlite3.Connection = storage.checkpointer.conn
        conn.set_trace_callback(lambda sql: seen.__setitem__(0, seen[0] + (sql == "COMMIT")))
        return lambda: seen[0]
    import psycopg

    def count() -> int:
        with psycopg.connect(ledger_url, autocommit=True) as conn:
            row = conn.execute("SELECT pg_current_xact_id()::text::bigint").fetchone()
        assert row is not None
        return int(row[0])

    return count


class Fan(TypedDict):
    done: Annotated[list[str], operator.add]


def fan_out(calls: list[str], fail_b: threading.Event, stop_b: bool = False) -> Any:
    """Two nodes run in one step: ``b`` fails (or stops at an interrupt) until told not to, and
    ``a`` finishes after that, so nothing saved before the run ends carries its writes; each run
    of a node is recorded in ``calls``."""
    b_ran = threading.Event()

    def a(state: Fan) -> dict[str, Any]:
        calls.append("a")
        if fail_b.is_set():
            assert b_ran.wait(10)
            time.sleep(0.3)  # b's error or interrupt is saved meanwhile
        return {"done": ["a"]}

    def b(state: Fan) -> dict[str, Any]:
        calls.append("b")
        b_ran.set()
        if stop_b:
            interrupt("may b go on?")
        elif fail_b.is_set():
            raise RuntimeError("b broke")
        return {"done": ["b"]}

    builder = StateGraph(Fan)
    builder.add_node("a", a)
    builder.add_node("b", b)
    builder.add_edge(START, "a")
    builder.add_edge(START, "b")
    return builder


@pytest.mark.parametrize("stop", ["error", "interrupt"])
def test_a_finished_sibling_of_a_stopped_node_is_saved_and_not_run_again(storage, stop):
    """LangGraph's promise for a step that stops part-way: the nodes that finished keep their
    writes and do not run again. A run holds those writes back; it saves them when it ends."""
    calls: list[str] = []
    fail_b = threading.Event()
    fail_b.set()
    builder = fan_out(calls, fail_b, stop_b=stop == "interrupt")
    graph = with_thread_leases(builder.compile(checkpointer=storage.checkpointer), storage.ledger)
    if stop == "error":
        with pytest.raises(RuntimeError, match="b broke"):
            graph.invoke({"done": []}, _config("fan"), durability="sync")
    else:
        graph.invoke({"done": []}, _config("fan"), durability="sync")
    tasks = {task.name: task for task in graph.get_state(_config("fan")).tasks}
    assert tasks["a"].result == {"done": ["a"]}

    fail_b.clear()
    resume = Command(resume="yes") if stop == "interrupt" else None
    final = graph.invoke(resume, _config("fan"), durability="sync")
    assert sorted(final["done"]) == ["a", "b"]
    assert calls.count("a") == 1


def test_an_async_turn_on_postgresql_saves_its_steps_batched_and_the_same_history(shop):
    """``open_async_storage``'s PostgreSQL saver batches too (``abatched``); SQLite's async saver
    does not (it commits on its connection), and its turns are covered by every other async test."""
    ledger_url = postgres_url()
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    from turnkit.storage import open_async_storage

    async def main() -> dict[str, float]:
        async with await open_async_storage(ledger_url) as storage:
            await storage.ledger.aset_setting("api_session_write_modules", ["shop"])
            graphs = {
                "ours": turn_graph(storage, shop, storage.checkpointer, [LIST, "ok"] * 10),
                "theirs": turn_graph(
                    storage, shop, AsyncPostgresSaver(storage.checkpointer.conn), [LIST, "ok"] * 10
                ),
            }
            count = commits(storage, ledger_url)
            spent = {}
            for name, graph in graphs.items():
                before = await asyncio.to_thread(count)
                for i in range(5):
                    config = _config(f"{name}{i}")
                    await graph.ainvoke({"messages": [HumanMessage("list")]}, config, context=ALICE)
                spent[name] = (await asyncio.to_thread(count) - before) / 5
            shown = {
                name: [
                    (s.metadata["step"], s.next, [(t.name, _plain(t.result)) for t in s.tasks])
                    async for s in graph.aget_state_history(_config(f"{name}0"))
                ]
                for name, graph in graphs.items()
            }
            assert shown["ours"] == shown["theirs"]
            assert len(shown["ours"]) == 8
            return spent

    spent = asyncio.run(main())
    assert spent["ours"] <= spent["theirs"] - 6, spent


@pytest.mark.parametrize("durability", ["async", "exit"])
def test_other_durabilities_save_the_same_history_as_langgraphs_saver(storage, shop, durability):
    ours = turn_graph(storage, shop, storage.checkpointer, [LIST, "Here they are."])
    theirs = turn_graph(storage, shop, langgraph_saver(storage), [LIST, "Here they are."])
    for graph, thread in ((ours, "ours"), (theirs, "theirs")):
        graph.invoke(
            {"messages": [HumanMessage("list")]},
            _config(thread),
            context=ALICE,
            durability=durability,
        )
    assert history(ours, "ours") == history(theirs, "theirs")
    assert ours.get_state(_config("ours")).values["messages"][-1].content == "Here they are."


def test_a_stream_closed_early_leaves_a_thread_that_goes_on(storage, shop):
    """The consumer stops reading after the first step: what the run deferred is saved when
    its stream is closed, and the next run goes on from there, as on LangGraph's saver."""
    for chosen, thread in ((storage.checkpointer, "ours"), (langgraph_saver(storage), "theirs")):
        graph = turn_graph(storage, shop, chosen, [LIST, "Here they are."])
        first = {"messages": [HumanMessage("list")]}
        stream = graph.stream(first, _config(thread), context=ALICE, durability="sync")
        next(stream)
        stream.close()
        assert graph.get_state(_config(thread)).next  # stopped part-way
        final = graph.invoke(None, _config(thread), context=ALICE, durability="sync")
        assert final["messages"][-1].content == "Here they are."


@pytest.mark.parametrize("saver", ["turnkit", "langgraph"])
def test_an_async_stream_closed_early_leaves_a_thread_that_goes_on(shop, saver):
    """As above with ``astream`` on ``open_async_storage``'s PostgreSQL saver (``abatched``)."""
    asyncio.run(_first_chunk_then_close(postgres_url(), shop, saver))


async def _first_chunk_then_close(url: str, shop: Any, saver: str) -> None:
    """Close ``astream`` after its first chunk, then finish the turn with ``ainvoke``."""
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    from turnkit.storage import open_async_storage

    async with await open_async_storage(url) as storage:
        await storage.ledger.aset_setting("api_session_write_modules", ["shop"])
        thread = saver
        chosen = storage.checkpointer
        if saver == "langgraph":
            chosen = AsyncPostgresSaver(storage.checkpointer.conn)
        graph = turn_graph(storage, shop, chosen, [LIST, "Here they are."])
        stream = graph.astream(
            {"messages": [HumanMessage("list")]}, _config(thread), context=ALICE, durability="sync"
        )
        await anext(stream)
        await stream.aclose()
        assert (await graph.aget_state(_config(thread))).next
        final = await graph.ainvoke(None, _config(thread), context=ALICE, durability="sync")
        assert final["messages"][-1].content == "Here they are."
