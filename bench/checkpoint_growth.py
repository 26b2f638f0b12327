"""Checkpoint bytes stored per round of one growing conversation (one thread, 100 rounds).

Each round is one turn: a user message, one tool call whose result is about 2 KB of JSON, and a
final answer. After every round the bytes in the checkpointer's tables are summed and the round's
share is the difference:

- SQLite: ``length()`` of ``checkpoints.checkpoint`` + ``metadata`` and ``writes.value``;
- PostgreSQL: ``pg_column_size()`` (the stored, possibly compressed size) of ``checkpoints``'
  ``checkpoint`` + ``metadata``, ``checkpoint_blobs.blob`` and ``checkpoint_writes.blob``.

turnkit (``open_storage``, default durability ``sync``; ``exit`` on SQLite for comparison) runs
next to ``create_agent`` with the same saver, tool and model. Bytes per round "do not grow" when
the mean of the last 10 rounds is at most 1.25x the mean of rounds 11-20 (means, since a saver or
channel may store a full snapshot every so many rounds).

turnkit keeps its messages in a ``DeltaChannel`` (``turnkit.nodes.history``): a checkpoint stores a
round's new messages, and a run that loads the thread replays the writes since the last snapshot.
So that the bytes saved are not paid for in time, the mean time per turn of rounds 1-10 and of the
last 10 rounds is reported too (wall time of ``invoke``, loading the thread included).

    .venv/bin/python bench/checkpoint_growth.py [--quick]
"""

from __future__ import annotations

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
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool

from turnkit import Caller, Executor, Registry, Tool
from turnkit.graph import TurnContext, build_turn_graph
from turnkit.storage import open_storage

SCENARIO = "checkpoint_growth"
ROUNDS, QUICK_ROUNDS = 100, 40
SHOWN = (1, 10, 50, 100)
QUICK_SHOWN = (1, 10, 20, 40)
FLAT = 1.25
LIST_TOOL = "bench_list_items"
CONTEXT = TurnContext(caller=Caller.public())


def list_items(limit: int) -> list[dict[str, Any]]:
    """List catalogue items (about 2 KB of JSON for 20 items)."""
    return [
        {
            "sku": f"TEA-{i:04d}",
            "name": f"Green tea number {i}, 100 g tin",
            "price": 4.5 + i,
            "stock": 10 * i,
            "origin": "Shizuoka",
        }
        for i in range(limit)
    ]


def list_then_answer(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> Any:
    if messages and isinstance(messages[-1], ToolMessage):
        return f"There are {len(messages)} messages so far."
    return {"tool_calls": [{"name": LIST_TOOL, "args": {"limit": 20}}]}


class _ListModule:
    key = "bench"

    def api_tools(self) -> list[Tool]:
        return [
            Tool(
                name="bench.list_items",
                audience="public",
                description=list_items.__doc__ or "",
                input_schema={
                    "type": "object",
                    "properties": {"limit": {"type": "integer", "minimum": 1, "maximum": 50}},
                    "required": ["limit"],
                    "additionalProperties": False,
                },
                annotations={"read_only": True},
                handler=lambda input, ctx: list_items(**input),
            )
        ]


Counter = Callable[[], int]
Grown = tuple[list[int], list[float]]
"""Bytes stored per round, seconds per turn."""


def _sqlite_bytes(path: Path) -> Counter:
    conn = sqlite3.connect(path, check_same_thread=False)

    def count() -> int:
        (checkpoints,) = conn.execute(
            "SELECT coalesce(sum(length(checkpoint) + length(metadata)), 0) FROM checkpoints"
        ).fetchone()
        (writes,) = conn.execute("SELECT coalesce(sum(length(value)), 0) FROM writes").fetchone()
        return int(checkpoints + writes)

    return count


def _postgres_bytes(url: str) -> tuple[Counter, Any]:
    import psycopg

    conn = psycopg.connect(url, autocommit=True)

    def count() -> int:
        row = conn.execute(
            "SELECT (SELECT coalesce(sum(pg_column_size(checkpoint) + pg_column_size(metadata)),"
            " 0) FROM checkpoints) + (SELECT coalesce(sum(pg_column_size(blob)), 0) FROM"
            " checkpoint_blobs) + (SELECT coalesce(sum(pg_column_size(blob)), 0) FROM"
            " checkpoint_writes)"
        ).fetchone()
        return int(row[0])  # type: ignore[index]

    return count, conn


def _grow(graph: Any, count: Counter, rounds: int, **options: Any) -> Grown:
    """Bytes stored by each round of one conversation, and the seconds each turn took."""
    config = {"configurable": {"thread_id": "conversation"}}
    before = count()
    per_round, seconds = [], []
    for i in range(rounds):
        start = time.perf_counter()
        result = graph.invoke({"messages": [HumanMessage(f"round {i + 1}")]}, config, **options)
        seconds.append(time.perf_counter() - start)
        if len(result["messages"]) != 4 * (i + 1):
            raise RuntimeError(f"round {i + 1}: {len(result['messages'])} messages, not 4 each")
        after = count()
        per_round.append(after - before)
        before = after
    return per_round, seconds


@contextmanager
def contenders(folder: Path) -> Iterator[list[tuple[str, Callable[[int], Grown]]]]:
    """``(case, grow)`` pairs; ``grow(rounds)`` runs the conversation on fresh storage."""
    model = _common.EndlessModel(list_then_answer)
    lc_tools = [StructuredTool.from_function(list_items, name=LIST_TOOL)]
    found: list[tuple[str, Callable[[int], Grown]]] = []
    with ExitStack() as stack:

        def turnkit_on(url: str, counter: Counter, durability: str) -> Callable[[int], Grown]:
            def grow(rounds: int) -> Grown:
                with open_storage(url) as storage:
                    executor = Executor(
                        Registry([_ListModule()]), ledger=storage.ledger, settings=_common.SETTINGS
                    )
                    try:
                        graph = build_turn_graph(
                            executor,
                            model,
                            checkpointer=storage.checkpointer,
                            durability=durability,  # type: ignore[arg-type]
                        )
                        return _grow(graph, counter, rounds, context=CONTEXT)
                    finally:
                        executor.close()

            return grow

        def agent_on(saver: Any, counter: Counter) -> Callable[[int], Grown]:
            def grow(rounds: int) -> Grown:
                return _grow(create_agent(model, lc_tools, checkpointer=saver), counter, rounds)

            return grow

        from langgraph.checkpoint.sqlite import SqliteSaver

        for durability in ("sync", "exit"):
            path = folder / f"turnkit-{durability}.sqlite"
            grow = turnkit_on(str(path), _sqlite_bytes(path), durability)
            found.append((f"sqlite: turnkit {durability}", grow))
        path = folder / "create_agent.sqlite"
        conn = sqlite3.connect(path, check_same_thread=False)
        stack.callback(conn.close)
        saver = SqliteSaver(conn)
        saver.setup()
        found.append(("sqlite: create_agent", agent_on(saver, _sqlite_bytes(path))))

        url = _common.postgres_url()
        if url is None:
            print(_common.postgres_note(), file=sys.stderr)
        else:
            ours = stack.enter_context(_common.postgres_schema(url))
            counter, pg = _postgres_bytes(ours)
            stack.callback(pg.close)
            found.append(("postgres: turnkit sync", turnkit_on(ours, counter, "sync")))
            theirs = stack.enter_context(_common.postgres_schema(url))
            saver, pool = _common.postgres_saver(theirs)
            stack.callback(pool.close)
            counter, pg = _postgres_bytes(theirs)
            stack.callback(pg.close)
            found.append(("postgres: create_agent", agent_on(saver, counter)))
        yield found


def run(quick: bool = False) -> list[dict[str, Any]]:
    """Bytes of chosen rounds per contender, the growth ratio, and turnkit ÷ create_agent."""
    rounds, shown = (QUICK_ROUNDS, QUICK_SHOWN) if quick else (ROUNDS, SHOWN)
    results: dict[str, list[int]] = {}
    times: dict[str, list[float]] = {}
    with (
        tempfile.TemporaryDirectory(prefix="turnkit-bench-") as folder,
        contenders(Path(folder)) as found,
    ):
        for case, grow in found:
            results[case], times[case] = grow(rounds)
    rows = []
    for case, per_round in results.items():
        backend = case.split(":")[0]
        peer = results.get(f"{backend}: create_agent")
        rows += _time_rows(case, times[case], times.get(f"{backend}: create_agent"))
        for n in shown:
            ratio = None if peer is None or peer is per_round else per_round[n - 1] / peer[n - 1]
            label = f"{case}: round {n}" + ("" if ratio is None else " (÷ create_agent)")
            rows.append(_common.row(SCENARIO, label, per_round[n - 1], "bytes", ratio=ratio))
        growth = sum(per_round[-10:]) / sum(per_round[10:20])
        rows.append(
            _common.row(
                SCENARIO,
                f"{case}: mean of rounds {rounds - 9}-{rounds} ÷ of rounds 11-20",
                growth,
                "x",
                target=f"<= {FLAT:g}x (flat)" if "turnkit sync" in case else None,
                met=growth <= FLAT,
            )
        )
        half = len(per_round) // 2
        rows.append(
            _common.row(
                SCENARIO,
                f"{case}: rounds {half + 1}-{len(per_round)} ÷ rounds 1-{half}, total bytes",
                sum(per_round[half:]) / sum(per_round[:half]),
                "x",
            )
        )
        rows.append(_common.row(SCENARIO, f"{case}: total", sum(per_round), "bytes"))
    return rows


def _time_rows(case: str, seconds: list[float], peer: list[float] | None) -> list[dict[str, Any]]:
    """Mean ms per turn of the first and the last 10 rounds (÷ create_agent's, when not it)."""
    rows = []
    for label, part in (
        ("1-10", slice(0, 10)),
        (f"{len(seconds) - 9}-{len(seconds)}", slice(-10, None)),
    ):
        mean = sum(seconds[part]) / 10
        ratio = None if peer is None or peer is seconds else mean / (sum(peer[part]) / 10)
        name = f"{case}: ms per turn, rounds {label}" + (
            "" if ratio is None else " (÷ create_agent)"
        )
        rows.append(_common.row(SCENARIO, name, mean * 1e3, "ms", ratio=ratio))
    return rows


if __name__ == "__main__":
    print(_common.format_table(run("--quick" in sys.argv)))
