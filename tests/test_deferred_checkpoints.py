"""A turn's checkpoints wait until the run acts (``FencedSaver``, ``settle_run``).

On ``turnkit.storage``'s savers a turn graph's run holds its checkpoints and task writes back and
writes them in one transaction when it must be durable: before a round of tool calls (or a
person's decisions) runs, at an interrupt, on its own reads, and at its end. What that must keep:

- the state that asked for a tool call is saved before the call runs, seen from another
  connection (so a crash can only lose steps that are harmless to run again; the kills are in
  ``test_crash_safety.py``);
- a save that fails stays held, in order, and is written by the next flush;
- a graph whose nodes do not settle (any graph given to ``with_thread_leases``) saves each
  checkpoint at its step;
- a run that goes round many times without acting is saved every ``DEFER_LIMIT`` saves.

The history a run leaves is compared with LangGraph's own saver's in ``test_batched_saves.py``.

Reaches ``turnkit.threads`` (``FencedSaver``, ``DEFER_LIMIT``, ``LEASE_KEY``, ``defer_saves``) and
``turnkit.ledger.leases`` directly: it tests the fenced saver's own deferral, which no public name
exposes.
"""

from __future__ import annotations

import asyncio
import sqlite3
import warnings
from collections.abc import Iterator
from typing import Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, StateGraph

from conftest import postgres_url
from turnkit import Caller, Executor, Registry, Tool
from turnkit.graph import TurnContext, build_turn_graph, with_thread_leases
from turnkit.storage import open_async_storage, open_storage
from turnkit.testing import ScriptedModel
from turnkit.threads.fenced import DEFER_LIMIT, FencedSaver
from turnkit.threads.leases import LEASE_KEY, defer_saves

ALICE = TurnContext(caller=Caller.session("alice"))
STEP = {"source": "loop", "step": 1}
"""A step's checkpoint metadata (a run's input checkpoint is saved at once)."""
THREAD = {"configurable": {"thread_id": "held"}}
PROBE = {"tool_calls": [{"name": "probe_read_state", "args": {}}]}


class Probe:
    """Module ``probe``: a read tool whose handler looks at the thread as another reader does."""

    key = "probe"

    def __init__(self, look: Any) -> None:
        self.look = look

    def api_tools(self) -> list[Tool]:
        return [
            Tool(
                name="probe.read_state",
                audience="public",
                annotations={"read_only": True},
                handler=lambda input, ctx: self.look(),
            )
        ]


def saved_messages(url: str) -> list[Any]:
    """The thread's messages as saved, read on a connection of its own (LangGraph's saver)."""
    graph = _reader(url)
    return list(graph.get_state(THREAD).values.get("messages", []))


def _reader(url: str) -> Any:
    """A graph of ``TurnState`` on LangGraph's own saver and a connection of its own: another
    reader of the thread (its messages are rebuilt from their deltas, as any reader's)."""
    if "postgresql" in url:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        conn: Any = psycopg.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
        saver: Any = PostgresSaver(conn)
    else:
        from langgraph.checkpoint.sqlite import SqliteSaver

        saver = SqliteSaver(sqlite3.connect(url, check_same_thread=False))
    from turnkit import TurnState

    builder = StateGraph(TurnState)
    builder.add_node("n", lambda state: {})
    builder.add_edge(START, "n")
    return builder.compile(checkpointer=saver)


def probing_graph(storage: Any, url: str, seen: list[list[Any]]) -> Any:
    def look() -> dict[str, Any]:
        seen.append(saved_messages(url))
        return {"looked": True}

    executor = Executor(Registry([Probe(look)]), ledger=storage.ledger)
    model = ScriptedModel([PROBE, "Looked."])
    return build_turn_graph(executor, model, checkpointer=storage.checkpointer)


def _asked(messages: list[Any]) -> bool:
    """The saved thread ends with the model's message that asked for the probe."""
    return (
        bool(messages)
        and isinstance(messages[-1], AIMessage)
        and [call["name"] for call in messages[-1].tool_calls] == ["probe_read_state"]
    )


def test_the_state_that_asked_for_a_tool_call_is_saved_before_the_call_runs(ledger_url):
    seen: list[list[Any]] = []
    with open_storage(ledger_url) as storage:
        graph = probing_graph(storage, ledger_url, seen)
        graph.invoke({"messages": [HumanMessage("look")]}, THREAD, context=ALICE)
        (during,) = seen
        assert [type(m) for m in during] == [HumanMessage, AIMessage]
        assert _asked(during)
        assert len(saved_messages(ledger_url)) == 4  # and the run's end saved the rest


def test_an_async_run_saves_the_state_that_asked_before_the_call_runs():
    """``open_async_storage``'s PostgreSQL saver defers too (``abatched``)."""
    url = postgres_url()
    seen: list[list[Any]] = []

    async def main() -> None:
        async with await open_async_storage(url) as storage:
            graph = probing_graph(storage, url, seen)
            await graph.ainvoke({"messages": [HumanMessage("look")]}, THREAD, context=ALICE)

    asyncio.run(main())
    (during,) = seen
    assert _asked(during)
    assert len(saved_messages(url)) == 4


def test_a_turn_commits_its_checkpoints_in_three_transactions(tmp_path):
    """Its input at once, its steps before the round of tool calls, the rest at the end
    (LangGraph's saver: one per save, fifteen)."""
    path = str(tmp_path / "commits.sqlite")
    with open_storage(path) as storage:
        graph = probing_graph(storage, path, [])
        commits = commits_of(storage)
        graph.invoke({"messages": [HumanMessage("look")]}, THREAD, context=ALICE)
        assert commits[0] == 3


def commits_of(storage: Any) -> list[int]:
    """A counter of the commits on the storage's SQLite saver connection, from now on."""
    commits = [0]
    storage.checkpointer.conn.set_trace_callback(
        lambda sql: commits.__setitem__(0, commits[0] + (sql == "COMMIT"))
    )
    return commits


@pytest.mark.parametrize("durability", ["async", "exit", "checkpoint_during"])
def test_a_run_with_another_durability_holds_no_checkpoint_back(tmp_path, durability):
    """Only ``sync`` durability hands LangGraph's checkpoints over before the next step starts,
    so only there can they wait for the run to act; with ``async`` each is saved as LangGraph
    saves it (with the task writes before it), and ``exit`` saves at the end: the input, then
    the rest (held, it would be one). LangGraph's deprecated ``checkpoint_during=True`` is
    ``async``."""
    path = str(tmp_path / "durability.sqlite")
    with open_storage(path) as storage:
        graph = probing_graph(storage, path, [])
        commits = commits_of(storage)
        options: dict[str, Any] = {"durability": durability}
        if durability == "checkpoint_during":
            options = {"checkpoint_during": True}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # checkpoint_during's deprecation
            graph.invoke({"messages": [HumanMessage("look")]}, THREAD, context=ALICE, **options)
        assert commits[0] == 2 if durability == "exit" else commits[0] >= 7
        assert len(saved_messages(path)) == 4


class Failing:
    """A saver stand-in that batches, records every call, and fails the next ``put`` asked
    once told to (``fail``)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.fail = False

    def batched(self) -> Any:
        import contextlib

        return contextlib.nullcontext()

    def put(self, config: Any, checkpoint: Any, metadata: Any, versions: Any) -> Any:
        if self.fail:
            self.fail = False
            raise OSError("disk full")
        self.calls.append(("put", checkpoint["id"]))
        return config

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        self.calls.append(("writes", task_id))


@pytest.fixture
def deferring_saver(tmp_path) -> Iterator[tuple[FencedSaver, Failing, dict[str, Any]]]:
    """A ``FencedSaver`` on ``Failing`` and the config of a turn graph's run holding a lease,
    whose first step is saved (a run's first step is saved at once, with its input)."""
    from turnkit.ledger.leases import LocalLeases

    inner = Failing()
    leases = LocalLeases()
    saver = FencedSaver(inner, leases)  # type: ignore[arg-type]
    lease = leases.take("t")
    assert lease is not None
    defer_saves(lease, saver)
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": "", LEASE_KEY: lease}}
    saver.put(config, {"id": "input"}, {"source": "input"}, {})  # type: ignore[typeddict-item]
    assert inner.calls == []  # the input waits for the first step
    saver.put(config, {"id": "first"}, STEP, {})  # type: ignore[typeddict-item]
    assert inner.calls == [("put", "input"), ("put", "first")]
    inner.calls.clear()
    yield saver, inner, config
    leases.release(lease)


def test_a_save_that_fails_stays_deferred_in_order_for_the_next_flush(deferring_saver):
    saver, inner, config = deferring_saver
    inner.fail = True
    saver.put(config, {"id": "c1"}, STEP, {})  # type: ignore[typeddict-item]
    saver.put_writes(config, [("calls", [])], "task-1")
    saver.put(config, {"id": "c2"}, STEP, {})  # type: ignore[typeddict-item]
    assert inner.calls == []  # all held
    with pytest.raises(OSError, match="disk full"):
        saver.flush("t")
    saver.put(config, {"id": "c3"}, STEP, {})  # type: ignore[typeddict-item]
    saver.flush("t")
    assert inner.calls == [("put", "c1"), ("writes", "task-1"), ("put", "c2"), ("put", "c3")]


def test_a_run_that_does_not_act_is_saved_every_defer_limit_saves(deferring_saver):
    saver, inner, config = deferring_saver
    for n in range(DEFER_LIMIT - 1):
        saver.put(config, {"id": f"c{n}"}, STEP, {})  # type: ignore[typeddict-item]
    assert inner.calls == []
    saver.put(config, {"id": "last"}, STEP, {})  # type: ignore[typeddict-item]
    assert len(inner.calls) == DEFER_LIMIT
    assert inner.calls[-1] == ("put", "last")


def test_a_checkpoint_of_a_graph_whose_nodes_do_not_settle_is_saved_at_its_step(tmp_path):
    """``with_thread_leases(any graph)``: its nodes act without settling, so each checkpoint is
    saved at its step (only task writes wait, for the checkpoint after them)."""
    path = str(tmp_path / "plain.sqlite")
    seen: list[list[Any]] = []

    class Count(TypedDict):
        messages: list[Any]
        n: int

    def first(state: Count) -> dict[str, Any]:
        return {"n": 1}

    def second(state: Count) -> dict[str, Any]:
        seen.append(saved_n(path))
        return {"n": 2}

    def saved_n(where: str) -> Any:
        return _reader(where).checkpointer.get_tuple(THREAD).checkpoint["channel_values"].get("n")

    builder = StateGraph(Count)
    builder.add_node("first", first)
    builder.add_node("second", second)
    builder.add_edge(START, "first")
    builder.add_edge("first", "second")
    with open_storage(path) as storage:
        graph = with_thread_leases(builder.compile(checkpointer=storage.checkpointer),
                                   storage.ledger)  # fmt: skip
        graph.invoke({"messages": [], "n": 0}, THREAD, durability="sync")
    assert seen == [1]  # the checkpoint after ``first`` was saved before ``second`` ran


def test_a_state_update_answers_the_config_of_the_checkpoint_it_saved(ledger_url):
    """``update_state`` takes the lease and its checkpoint waits like a run's: the config it
    answers at once names the checkpoint that is then saved (as LangGraph's saver answers)."""
    with open_storage(ledger_url) as storage:
        graph = probing_graph(storage, ledger_url, [])
        graph.invoke({"messages": [HumanMessage("look")]}, THREAD, context=ALICE)
        answered = graph.update_state(THREAD, {"messages": [AIMessage("edited", id="e1")]})
        state = graph.get_state(THREAD)
        assert answered == state.config
        assert state.values["messages"][-1].content == "edited"
        assert saved_messages(ledger_url)[-1].content == "edited"


def _lease_check(monkeypatch: Any, config: dict[str, Any], *answers: Any) -> None:
    """The run's lease cannot be vouched for: asking the database gives ``answers`` in turn
    (an exception is raised)."""
    leases = config["configurable"][LEASE_KEY].leases
    given = iter(answers)

    def recheck(lease: Any) -> bool:
        answer = next(given)
        if isinstance(answer, Exception):
            raise answer
        return bool(answer)

    monkeypatch.setattr(leases, "vouched", lambda lease: False)
    monkeypatch.setattr(leases, "recheck", recheck)


def test_a_flush_whose_lease_check_fails_keeps_its_saves(deferring_saver, monkeypatch):
    saver, inner, config = deferring_saver
    saver.put(config, {"id": "c1"}, STEP, {})  # type: ignore[typeddict-item]
    _lease_check(monkeypatch, config, OSError("database unreachable"), True)
    with pytest.raises(OSError, match="unreachable"):
        saver.flush("t")
    saver.flush("t")
    assert inner.calls == [("put", "c1")]


def test_a_flush_of_a_run_that_lost_its_lease_drops_its_saves(deferring_saver, monkeypatch):
    """The thread is another run's now: what this one deferred is never written."""
    from turnkit import LeaseLost

    saver, inner, config = deferring_saver
    saver.put(config, {"id": "c1"}, STEP, {})  # type: ignore[typeddict-item]
    _lease_check(monkeypatch, config, False)
    with pytest.raises(LeaseLost):
        saver.flush("t")
    monkeypatch.undo()
    saver.flush("t")
    assert inner.calls == []
