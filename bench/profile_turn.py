"""Where one turnkit turn spends its time: ledger round trips, settings reads, and a profile.

Not part of ``python -m bench``'s table: a diagnostic. Runs the ``turn_overhead`` read turn (one
user message, one read tool call, the final answer) on turnkit's graph without a checkpointer
(the executor's default SQLite ledger) and counts, per turn, every ledger method called, every SQL
statement it sent (``_run``/``_rows``) and the time spent in them; then profiles a batch of turns
with cProfile and prints the top functions by cumulative time.

    .venv/bin/python bench/profile_turn.py [--turns N] [--top N]
        [--checkpointer none|memory|sqlite|postgres] [--durability sync|async|exit]
        [--match REGEX]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import cProfile
import functools
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

try:
    from bench import _common
except ModuleNotFoundError:  # run as a script: bench/ is sys.path[0], the repository is not
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench import _common

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from bench.turn_overhead import CONTEXT, QUESTION, SESSION
from turnkit import Ledger
from turnkit.graph import build_turn_graph
from turnkit.storage import open_storage
from turnkit.threads.leases import give_back, take

METHODS = [
    name
    for name, value in vars(Ledger).items()
    if callable(value) and not name.startswith("_") and name[1:] not in vars(Ledger)
] + ["_run", "_rows"]


class Tally:
    """Calls and seconds per ledger method, wrapped on one ledger instance."""

    def __init__(self, ledger: Ledger) -> None:
        self.calls: collections.Counter[str] = collections.Counter()
        self.seconds: collections.Counter[str] = collections.Counter()
        for name in METHODS:
            method = getattr(ledger, name, None)
            if method is not None:
                setattr(ledger, name, self._wrap(name, method))

    def _wrap(self, name: str, method: Any) -> Any:
        @functools.wraps(method)
        def counted(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.calls[name] += 1
                self.seconds[name] += time.perf_counter() - start

        return counted

    def reset(self) -> None:
        self.calls.clear()
        self.seconds.clear()


def lease_cost(ledger: Any, times: int = 500) -> float:
    """Seconds to take a thread's lease and give it back, as every checkpointed run does (the
    SQLite ones are in the ledger counts above too; PostgreSQL's go through a pool of their own)."""
    leases = ledger.thread_leases()
    for _ in range(50):
        give_back(take(leases, "lease-cost", 0))
    start = time.perf_counter()
    for _ in range(times):
        give_back(take(leases, "lease-cost", 0))
    return (time.perf_counter() - start) / times


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    backends = ("none", "memory", "sqlite", "postgres")
    parser.add_argument("--checkpointer", choices=backends, default="none")
    parser.add_argument("--durability", choices=("sync", "async", "exit"), default="sync")
    parser.add_argument("--caller", choices=("public", "session"), default="public")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--match", help="also list the functions whose file or name match this")
    args = parser.parse_args(argv)
    session = args.caller == "session"
    make_executor = _common.session_executor if session else _common.turnkit_executor
    context = SESSION if session else CONTEXT

    folder = tempfile.mkdtemp(prefix="turnkit-profile-")
    storage = None
    schema = None
    if args.checkpointer in ("sqlite", "postgres"):
        if args.checkpointer == "postgres":
            base = _common.postgres_url()
            if base is None:
                raise SystemExit(_common.postgres_note())
            schema = _common.postgres_schema(base)
            storage = open_storage(schema.__enter__())
        else:
            storage = open_storage(Path(folder) / "turnkit.sqlite")
        executor, saver = make_executor(storage.ledger), storage.checkpointer
    else:
        executor = make_executor()
        saver = InMemorySaver() if args.checkpointer == "memory" else None
    durability = args.durability if saver is not None else "async"  # see turn_overhead.py
    graph = build_turn_graph(
        executor, _common.EndlessModel(), checkpointer=saver, durability=durability
    )
    counter = iter(range(10**9))

    def turn() -> Any:
        config = {"configurable": {"thread_id": f"t-{next(counter)}"}} if saver else None
        return graph.invoke({"messages": [HumanMessage(QUESTION)]}, config, context=context)

    for _ in range(30):
        turn()
    tally = Tally(executor.ledger)
    start = time.perf_counter()
    for _ in range(args.turns):
        turn()
    per_turn = (time.perf_counter() - start) / args.turns
    print(
        f"caller={args.caller} checkpointer={args.checkpointer} durability={durability}: "
        f"{per_turn * 1e3:.3f} ms per turn ({1 / per_turn:.0f} turns/s), ledger (counted):"
    )
    for name, calls in tally.calls.most_common():
        share = tally.seconds[name] / args.turns
        print(f"  {name:<22} {calls / args.turns:5.1f} per turn  {share * 1e6:8.1f} µs per turn")
    statements = tally.calls["_run"] + tally.calls["_rows"]
    seconds = tally.seconds["_run"] + tally.seconds["_rows"]
    print(
        f"  = {statements / args.turns:.1f} SQL round trips per turn, "
        f"{seconds / args.turns * 1e6:.0f} µs per turn "
        f"({seconds / args.turns / per_turn:.0%} of the turn, timer overhead included)"
    )

    if storage is not None:
        print(
            f"  thread lease: {lease_cost(storage.ledger) * 1e6:.0f} µs per turn (take, give back)"
        )
    if storage is not None:  # open_storage's savers are sync only
        print("  async read turn: not counted on a sync saver (open_async_storage's are async)")
    else:
        print(f"  async read turn: {hops(graph, saver)} worker-thread hops (asyncio.to_thread)")
    print(f"  Agent.prompt: {thread_reads()} reads of its thread (aget_state) per prompt")

    tally.reset()
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(args.turns):
        turn()
    profile.disable()
    print(f"\ncProfile of {args.turns} turns, top {args.top} by cumulative time:")
    stats = pstats.Stats(profile).strip_dirs().sort_stats("cumulative")
    stats.print_stats(args.top)
    if args.match:
        print(f"functions matching {args.match!r}:")
        stats.print_stats(args.match)
    executor.close()
    if storage is not None:
        storage.close()
    if schema is not None:
        schema.__exit__(None, None, None)


def hops(graph: Any, saver: Any) -> int:
    """Worker-thread hops of one async read turn (each is a queue and a wake-up: CPU and
    latency under concurrency)."""
    seen = []
    original = asyncio.to_thread

    async def counted(function: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(getattr(function, "__name__", "?"))
        return await original(function, *args, **kwargs)

    config = {"configurable": {"thread_id": "hops"}} if saver else None
    asyncio.to_thread = counted  # type: ignore[assignment]
    try:
        asyncio.run(graph.ainvoke({"messages": [HumanMessage(QUESTION)]}, config, context=CONTEXT))
    finally:
        asyncio.to_thread = original
    return len(seen)


def thread_reads() -> int:
    """How often ``Agent.prompt`` reads its thread (each read replays the messages since the
    last snapshot), on the second prompt of a conversation."""
    from turnkit import Agent

    with Agent(_common.EndlessModel(), tools=[]) as agent:
        agent.prompt("hi")
        reads = []
        read = agent.graph.aget_state

        async def counted(*args: Any, **kwargs: Any) -> Any:
            reads.append(1)
            return await read(*args, **kwargs)

        agent.graph.aget_state = counted  # type: ignore[method-assign]
        agent.prompt("and again")
    return len(reads)


if __name__ == "__main__":
    main()
