"""Turns per second: one user message -> one read tool call -> the final answer, repeated.

Contenders, on the same endless scripted model (``_common.EndlessModel``) and the same tool
functions:

- a bare Python loop (bind the tools, call the model, run the function, call the model again);
- ``langchain.agents.create_agent``, without and with ``HumanInTheLoopMiddleware`` gating the write
  tool only (the read tool is never interrupted, so no turn stops);
- turnkit's ``build_turn_graph`` (rights, validation, fitting, the ledger), for a public caller
  on public tools, and for a signed-in **session** caller on tools behind a scope and a
  permission, asked of a permission provider on every call (the agent case users run);
- ``create_agent`` with turnkit's ``TurnkitMiddleware`` for the same signed-in session caller
  on the same governed tools (``_common.session_executor``), against ``create_agent`` with
  ``HumanInTheLoopMiddleware`` on the plain tools: what governing an existing agent costs
  beyond LangChain's own gate;
- the **floor** of that middleware (``_middleware_floor.py``): ``create_agent`` with
  ``HumanInTheLoopMiddleware`` and a small middleware keeping the same promises by hand for the
  same caller (its rights asked of the same permission provider on every call, the input checked
  against the tool's JSON schema, a rate-limit charge and an audit row on the group's storage,
  the function run in a thread pool under a timeout), without turnkit. ``TurnkitMiddleware ÷
  floor`` is what turnkit's own implementation of those promises costs (and what it does beyond
  them: idempotency, holds, fitting, tracing, the operator's settings);
- turnkit's **shape** without turnkit's work (``_shape.py``): the same six nodes, channels and
  routes doing only what the turn needs. ``turnkit ÷ shape`` is the price of turnkit's own work,
  ``shape ÷ create_agent`` the price of six visible steps in LangGraph.

Each runs without a checkpointer, with ``InMemorySaver`` and with a SQLite file (turnkit through
``open_storage``; ``create_agent`` with a ``SqliteSaver`` on its own file with the same WAL
pragmas), and on PostgreSQL when a server is configured. turnkit runs in each of LangGraph's
durability modes: ``sync`` (turnkit's default), ``async`` (LangGraph's default, the one
``create_agent`` uses) and ``exit``. Every turn is a new thread, so the checkpoint size stays the
same from turn to turn (growth with the conversation is ``checkpoint_growth.py``'s subject).

Time per turn is the median of 10 batches of 25 turns (after 20 warm-up turns), the contenders'
batches interleaved so that a burst of load on the machine hits them alike; between batches the
in-memory saver forgets the batch's threads and garbage is collected. The ratio of a turnkit row
is its time per turn over the peer named in the row (below 1 is faster); the ratio of a peer row
is its time over the bare loop's. A ratio is the median of the batch-by-batch ratios (each batch
over the peer's batch of the same round, run moments apart), so a slow spell of the shared
machine that falls on some rounds moves both sides of those rounds, not the ratio.

    .venv/bin/python bench/turn_overhead.py [--quick]
"""

from __future__ import annotations

import gc
import json
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

try:
    from bench import _common
except ModuleNotFoundError:  # run as a script: bench/ is sys.path[0], the repository is not
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench import _common

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from bench._middleware_floor import Database, InMemory, PromisesByHand, Store
from bench._shape import shape_graph
from turnkit import Caller
from turnkit.graph import TurnContext, build_turn_graph
from turnkit.middleware import TurnkitMiddleware
from turnkit.storage import open_storage

SCENARIO = "turn_overhead"
BATCH, BATCHES, WARMUP = 25, 10, 20
"""250 timed turns per contender, in 10 batches interleaved with the other contenders' batches."""
QUICK_BATCH, QUICK_BATCHES, QUICK_WARMUP = 10, 4, 5
CONTEXT = TurnContext(caller=Caller.public())
SESSION = TurnContext(caller=Caller.session("u_1"))
QUESTION = "What does TEA-0001 cost?"
SQLITE_PRAGMAS = ("PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL")
"""The pragmas ``open_storage`` gives turnkit's file, given to ``create_agent``'s file too."""

Turn = Callable[[int], Any]


def bare_loop(model: Any) -> Turn:
    """The least a program can do: bind, call, run the function, answer."""
    tools = _common.langchain_tools()
    bound = model.bind_tools(tools)
    functions = {tool.name: tool.func for tool in tools}

    def turn(_: int) -> list[Any]:
        messages: list[Any] = [HumanMessage(QUESTION)]
        while True:
            ai = bound.invoke(messages)
            messages.append(ai)
            if not ai.tool_calls:
                return messages
            for call in ai.tool_calls:
                result = functions[call["name"]](**call["args"])  # type: ignore[misc]
                messages.append(ToolMessage(json.dumps(result), tool_call_id=call["id"]))

    return turn


def graph_turn(graph: Any, label: str, *, threads: bool, **options: Any) -> Turn:
    """``graph.invoke`` of one user message; a new thread per turn when ``threads``.

    With an ``InMemorySaver`` the turn's threads are forgotten by ``tidy(turn)`` between timed
    batches, so the heap (and the garbage collector's work) does not grow from batch to batch.
    """
    saver = graph.checkpointer if isinstance(graph.checkpointer, InMemorySaver) else None
    used: list[str] = []

    def turn(i: int) -> Any:
        config = None
        if threads:
            config = {"configurable": {"thread_id": f"{label}-{i}"}}
            if saver is not None:
                used.append(config["configurable"]["thread_id"])
        return graph.invoke({"messages": [HumanMessage(QUESTION)]}, config, **options)

    def forget() -> None:
        for thread_id in used:
            saver.delete_thread(thread_id)  # type: ignore[union-attr]
        used.clear()

    _TIDY[turn] = forget
    return turn


_TIDY: dict[Turn, Callable[[], None]] = {}


def tidy(turn: Turn) -> None:
    """Forget what ``turn`` left in an in-memory saver, and collect garbage."""
    forget = _TIDY.get(turn)
    if forget is not None:
        forget()
    gc.collect()


def agent(model: Any, checkpointer: Any, *, hitl: bool) -> Any:
    middleware = [HumanInTheLoopMiddleware({_common.WRITE_TOOL: True})] if hitl else []
    return create_agent(
        model, _common.langchain_tools(), middleware=middleware, checkpointer=checkpointer
    )


def _sqlite_saver(path: Path) -> Any:
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(path, check_same_thread=False)
    for pragma in SQLITE_PRAGMAS:
        conn.execute(pragma)
    saver = SqliteSaver(conn)
    saver.setup()
    return saver, conn


@contextmanager
def contenders(folder: Path) -> Iterator[list[tuple[str, str, Turn]]]:
    """``(group, case, turn)`` for every contender; their storage is closed on exit."""
    model = _common.EndlessModel()
    found: list[tuple[str, str, Turn]] = []
    with ExitStack() as stack:
        executor = _common.turnkit_executor()
        stack.callback(executor.close)

        found.append(("none", "bare loop", bare_loop(model)))
        for hitl in (False, True):
            graph = agent(model, None, hitl=hitl)
            found.append(("none", _peer(hitl), graph_turn(graph, "x", threads=False)))
        # Without a checkpointer durability means nothing, but turnkit's default "sync" makes
        # LangGraph 1.2.24 fail (it waits for a checkpoint future that never existed).
        graph = build_turn_graph(executor, model, durability="async")
        found.append(("none", "turnkit", graph_turn(graph, "x", threads=False, context=CONTEXT)))
        session = _common.session_executor()
        stack.callback(session.close)
        graph = build_turn_graph(session, model, durability="async")
        found.append(
            ("none", "turnkit session", graph_turn(graph, "s", threads=False, context=SESSION))
        )
        found.append(("none", "shape", graph_turn(shape_graph(model), "x", threads=False)))
        found.append(_middleware("none", model, session, None))
        found.append(_floor(stack, "none", model, None, InMemory()))

        memory = InMemorySaver()
        found += _checkpointed("memory", model, executor, memory, memory)
        found += _session("memory", model, session, memory)
        found.append(_middleware("memory", model, session, memory))
        found.append(_floor(stack, "memory", model, memory, InMemory()))
        found.append(_shape("memory", model, InMemorySaver()))

        storage = open_storage(folder / "turnkit.sqlite")
        stack.callback(storage.close)
        sqlite_executor = _common.turnkit_executor(storage.ledger)
        stack.callback(sqlite_executor.close)
        saver, conn = _sqlite_saver(folder / "create_agent.sqlite")
        stack.callback(conn.close)
        found += _checkpointed("sqlite", model, sqlite_executor, storage.checkpointer, saver)
        sqlite_session = _common.session_executor(storage.ledger)
        stack.callback(sqlite_session.close)
        found += _session("sqlite", model, sqlite_session, storage.checkpointer)
        found.append(_middleware("sqlite", model, sqlite_session, storage.checkpointer))
        found.append(_floor(stack, "sqlite", model, saver, Database(str(folder / "floor.sqlite"))))
        found.append(_shape("sqlite", model, saver))

        url = _common.postgres_url()
        if url is not None:
            schema_url = stack.enter_context(_common.postgres_schema(url))
            pg = open_storage(schema_url)
            stack.callback(pg.close)
            pg_executor = _common.turnkit_executor(pg.ledger)
            stack.callback(pg_executor.close)
            saver, pool = _common.postgres_saver(schema_url)
            stack.callback(pool.close)
            found += _checkpointed("postgres", model, pg_executor, pg.checkpointer, saver)
            pg_session = _common.session_executor(pg.ledger)
            stack.callback(pg_session.close)
            found += _session("postgres", model, pg_session, pg.checkpointer)
            found.append(_middleware("postgres", model, pg_session, pg.checkpointer))
            found.append(_floor(stack, "postgres", model, saver, Database(schema_url)))
            found.append(_shape("postgres", model, saver))
        else:
            print(_common.postgres_note(), file=sys.stderr)
        yield found


def _peer(hitl: bool) -> str:
    return "create_agent+HITL" if hitl else "create_agent"


def _checkpointed(
    group: str, model: Any, executor: Any, ours: Any, theirs: Any
) -> list[tuple[str, str, Turn]]:
    found = []
    for hitl in (False, True):
        graph = agent(model, theirs, hitl=hitl)
        found.append((group, _peer(hitl), graph_turn(graph, f"{group}-{hitl}", threads=True)))
    for durability in ("sync", "async", "exit"):
        graph = build_turn_graph(executor, model, checkpointer=ours, durability=durability)
        label = f"{group}-turnkit-{durability}"
        turn = graph_turn(graph, label, threads=True, context=CONTEXT)
        found.append((group, f"turnkit {durability}", turn))
    return found


def _session(group: str, model: Any, executor: Any, saver: Any) -> list[tuple[str, str, Turn]]:
    """turnkit for the signed-in session caller, at its default durability."""
    graph = build_turn_graph(executor, model, checkpointer=saver)
    turn = graph_turn(graph, f"{group}-session", threads=True, context=SESSION)
    return [(group, "turnkit session sync", turn)]


MIDDLEWARE = "create_agent+TurnkitMiddleware session"


def _middleware(group: str, model: Any, executor: Any, saver: Any) -> tuple[str, str, Turn]:
    """``create_agent`` governed by ``TurnkitMiddleware`` for the session caller, on turnkit's
    checkpointer (``open_storage``'s, as the turn graph's rows), at ``create_agent``'s default
    durability, as its HITL peer runs."""
    graph = create_agent(model, middleware=[TurnkitMiddleware(executor)], checkpointer=saver)
    turn = graph_turn(graph, f"{group}-middleware", threads=saver is not None, context=SESSION)
    return (group, MIDDLEWARE, turn)


FLOOR = "create_agent+HITL+promises by hand"


def _floor(
    stack: ExitStack, group: str, model: Any, saver: Any, store: Store
) -> tuple[str, str, Turn]:
    """The middleware's floor: ``create_agent`` with HITL and ``PromisesByHand`` on ``store``
    (closed with ``stack``), on the HITL peer's checkpointer, for the same session caller."""
    floor = PromisesByHand(_common.permissions, store)
    stack.callback(store.close)
    stack.callback(floor.close)
    middleware = [HumanInTheLoopMiddleware({_common.WRITE_TOOL: True}), floor]
    graph = create_agent(
        model, _common.langchain_tools(), middleware=middleware, checkpointer=saver
    )
    turn = graph_turn(graph, f"{group}-floor", threads=saver is not None, context=SESSION)
    return (group, FLOOR, turn)


def _shape(group: str, model: Any, saver: Any) -> tuple[str, str, Turn]:
    """The six-node shape on ``saver``, with turnkit's default durability (``sync``)."""
    turn = graph_turn(shape_graph(model, saver), f"{group}-shape", threads=True, durability="sync")
    return (group, "shape", turn)


def _check(case: str, result: Any) -> None:
    """A turn that did not make exactly one tool call and answer times nothing."""
    messages = result["messages"] if isinstance(result, dict) else result
    tool_messages = [m for m in messages if isinstance(m, ToolMessage)]
    if (
        len(messages) != 4
        or len(tool_messages) != 1
        or "Green tea" not in tool_messages[0].content
        or not str(messages[-1].content).startswith("Done:")
    ):
        raise RuntimeError(f"{case}: unexpected turn {messages!r:.500}")


Times = dict[tuple[str, str], list[float]]
"""Seconds per turn of each contender in each round of timed batches, in round order."""


def measure(quick: bool = False) -> Times:
    """Seconds per turn of every contender in each of the interleaved rounds of batches."""
    turns, repeats, warmup = (
        (QUICK_BATCH, QUICK_BATCHES, QUICK_WARMUP) if quick else (BATCH, BATCHES, WARMUP)
    )
    with (
        tempfile.TemporaryDirectory(prefix="turnkit-bench-") as folder,
        contenders(Path(folder)) as found,
    ):
        counter = iter(range(10**9))
        for group, case, turn in found:
            _check(f"{group}: {case}", turn(next(counter)))
            for _ in range(warmup):
                turn(next(counter))
            tidy(turn)
        times: dict[tuple[str, str], list[float]] = {(g, c): [] for g, c, _ in found}
        for _ in range(repeats):
            for group, case, turn in found:
                start = time.perf_counter()
                for _ in range(turns):
                    turn(next(counter))
                times[group, case].append((time.perf_counter() - start) / turns)
                tidy(turn)
    return times


def paired(times: Times, ours: tuple[str, str], peer: tuple[str, str]) -> float:
    """The median over rounds of ``ours``' batch time over ``peer``'s batch time that round."""
    return _common.median([a / b for a, b in zip(times[ours], times[peer], strict=True)])


def rows_of(times: Times) -> list[dict[str, Any]]:
    rows = []
    seconds = {key: _common.median(values) for key, values in times.items()}
    for (group, case), per_turn in seconds.items():
        turns_per_s = 1 / per_turn
        if case == "shape":
            peer = "create_agent" if group == "none" else "create_agent+HITL"
            label = f"{group}: shape, turnkit's work removed (÷ {peer})"
            ratio = paired(times, (group, case), (group, peer))
            rows.append(_common.row(SCENARIO, label, turns_per_s, "turns/s", ratio=ratio))
            for ours in ("turnkit", "turnkit sync"):
                if (group, ours) in seconds:
                    own = paired(times, (group, ours), (group, case))
                    label = f"{group}: {ours} (÷ shape: the price of turnkit's own work)"
                    rows.append(_common.row(SCENARIO, label, 1 / seconds[group, ours],
                                            "turns/s", ratio=own))  # fmt: skip
            continue
        if case == MIDDLEWARE:
            ratio = paired(times, (group, case), (group, "create_agent+HITL"))
            label = f"{group}: {case} (÷ create_agent+HITL)"
            rows.append(_common.row(SCENARIO, label, turns_per_s, "turns/s", ratio=ratio,
                                    target="<= 1.0x", met=ratio <= 1.0))  # fmt: skip
            if (group, FLOOR) in seconds:
                own = paired(times, (group, case), (group, FLOOR))
                label = f"{group}: {case} (÷ HITL+promises by hand)"
                rows.append(_common.row(SCENARIO, label, turns_per_s, "turns/s", ratio=own))
            continue
        if case == FLOOR:
            ratio = paired(times, (group, case), (group, "create_agent+HITL"))
            label = f"{group}: {case} (÷ create_agent+HITL)"
            rows.append(_common.row(SCENARIO, label, turns_per_s, "turns/s", ratio=ratio))
            continue
        if not case.startswith("turnkit"):
            ratio = (
                None if case == "bare loop" else paired(times, (group, case), ("none", "bare loop"))
            )
            label = f"{group}: {case}" + ("" if ratio is None else " (÷ bare loop)")
            rows.append(_common.row(SCENARIO, label, turns_per_s, "turns/s", ratio=ratio))
            continue
        peer = "create_agent" if group == "none" else "create_agent+HITL"
        ratio = paired(times, (group, case), (group, peer))
        label = f"{group}: {case} (÷ {peer})"
        target: dict[str, Any] = {}
        if case in ("turnkit", "turnkit sync", "turnkit session", "turnkit session sync"):
            target = {"target": "<= 1.0x", "met": ratio <= 1.0}
        rows.append(_common.row(SCENARIO, label, turns_per_s, "turns/s", ratio=ratio, **target))
        if group != "none":
            plain = paired(times, (group, case), (group, "create_agent"))
            rows.append(
                _common.row(
                    SCENARIO,
                    f"{group}: {case} (÷ create_agent)",
                    turns_per_s,
                    "turns/s",
                    ratio=plain,
                )
            )
    return rows


def run(quick: bool = False) -> list[dict[str, Any]]:
    """Rows of turns/s per contender and the ratios to the peers (see the module docstring)."""
    return rows_of(measure(quick))


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    print(_common.format_table(run(quick)))
