"""500 concurrent async turns against a model that takes 50 ms per call.

Each turn is one ``ainvoke`` on its own thread id (``InMemorySaver``): a user message, one read
tool call, the final answer, so two model calls of 50 ms each. The reference is the same 500 turns
run one after another on an instant model: its CPU time (``time.process_time``, every thread of
the process) is what the work itself costs. The target: the concurrent run's wall time is at most
1.25 x that CPU time + 2 x the model latency per round (2 x 2 x 50 ms = 200 ms), i.e. nothing
serialises the turns beyond the CPU they need and nothing blocks the event loop for long. A
separate pass of 50 concurrent turns in asyncio's debug mode reports the longest single step of
the event loop (a blocking call inside a node shows up there as one long step); the objects alive
before it are frozen out of the garbage collector (``gc.freeze``), since a full collection of the
libraries' import-time objects takes ~80 ms here and would hide what the turns themselves do.
The time the concurrent run spent in garbage collection is reported too: with 500 turns alive at
once, full collections are long and frequent, and they are most of the wall time beyond the CPU
the turns need (``gc.freeze()`` after start-up, in the application, removed ~40 % of it here).

The concurrent pass is run five times (twice with ``--quick``), the contenders' passes
interleaved, their order rotating each round, garbage collected before each: values are
medians, ratios the medians of the round-by-round ratios, so a burst of load on the shared
machine moves both sides of a round.

turnkit runs with its default durability (``sync``) and with ``async`` for comparison;
``create_agent`` (LangGraph's default, ``async``) is the peer. turnkit's shape with turnkit's work
removed (``_shape.py``) runs too: ``shape ÷ create_agent`` is what six visible steps cost in
LangGraph under concurrency, ``turnkit ÷ shape`` what turnkit's own work costs. So does the
shape's work in ``create_agent``'s three steps, writing the same channels: where it matches
``create_agent``, the six-step shape's excess is the three more steps, LangGraph's per-step
cost, not turnkit's state. Ratios are wall time over the target (below 1 meets it), and for
turnkit also wall time over ``create_agent``'s.

    .venv/bin/python bench/concurrency.py [--quick]
"""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

try:
    from bench import _common
except ModuleNotFoundError:  # run as a script: bench/ is sys.path[0], the repository is not
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench import _common

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from bench._shape import shape_graph, three_step_graph
from turnkit import Caller
from turnkit.graph import TurnContext, build_turn_graph

SCENARIO = "concurrency"
TURNS, QUICK_TURNS = 500, 150
ROUNDS, QUICK_ROUNDS = 5, 2
"""Concurrent passes per contender, interleaved with the other contenders'."""
WARMUP = 20
LOOP_CHECK_TURNS = 50
LATENCY = 0.05
MODEL_CALLS = 2
SLACK = 1.25
CONTEXT = TurnContext(caller=Caller.public())
OWN_WORK = 1.05
"""The target of turnkit's CPU per concurrent turn over the shape's (its own work)."""

Factory = Callable[[Any], tuple[Any, dict[str, Any]]]
"""``model -> (graph, ainvoke options)``; a fresh ``InMemorySaver`` per call."""


def turnkit_graph(durability: str) -> Factory:
    def make(model: Any) -> tuple[Any, dict[str, Any]]:
        executor = _common.turnkit_executor()
        graph = build_turn_graph(
            executor,
            model,
            checkpointer=InMemorySaver(),
            durability=durability,  # type: ignore[arg-type]
        )
        return graph, {"context": CONTEXT, "_close": executor.close}

    return make


def shape(model: Any) -> tuple[Any, dict[str, Any]]:
    """turnkit's six-node shape with turnkit's work removed (``_shape.py``), ``sync`` as turnkit."""
    return shape_graph(model, InMemorySaver()), {"durability": "sync"}


def three_steps(model: Any) -> tuple[Any, dict[str, Any]]:
    """The shape's work in ``create_agent``'s three steps, same state (``_shape.py``)."""
    return three_step_graph(model, InMemorySaver()), {"durability": "sync"}


def agent_graph(model: Any) -> tuple[Any, dict[str, Any]]:
    return create_agent(model, _common.langchain_tools(), checkpointer=InMemorySaver()), {}


async def _run_turns(graph: Any, turns: int, label: str, concurrent: bool, options: Any) -> None:
    async def one(i: int) -> Any:
        config = {"configurable": {"thread_id": f"{label}-{i}"}}
        return await graph.ainvoke({"messages": [HumanMessage("TEA-0001?")]}, config, **options)

    if concurrent:
        results = await asyncio.gather(*(one(i) for i in range(turns)))
    else:
        results = [await one(i) for i in range(turns)]
    bad = [r for r in results if len(r["messages"]) != 4]
    if bad:
        raise RuntimeError(f"{label}: {len(bad)} turns did not end after one tool call")


class _SlowSteps(logging.Handler):
    """Collects the durations asyncio's debug mode reports for slow event-loop steps."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.durations: list[float] = [0.0]

    def emit(self, record: logging.LogRecord) -> None:
        if str(record.msg).startswith("Executing") and isinstance(record.args, tuple):
            self.durations.append(float(record.args[-1]))


def longest_step(make: Factory, turns: int = LOOP_CHECK_TURNS) -> float:
    """The longest event-loop step, in seconds, of ``turns`` concurrent turns (debug mode)."""
    graph, options = make(_common.EndlessModel(latency=LATENCY))
    close = options.pop("_close", None)
    handler = _SlowSteps()
    log = logging.getLogger("asyncio")
    log.addHandler(handler)
    propagate, log.propagate = log.propagate, False
    gc.collect()
    gc.freeze()

    async def main() -> None:
        asyncio.get_running_loop().slow_callback_duration = 0.001
        await _run_turns(graph, turns, "debug", True, options)

    try:
        asyncio.run(main(), debug=True)
    finally:
        gc.unfreeze()
        log.removeHandler(handler)
        log.propagate = propagate
        if close is not None:
            close()
    return max(handler.durations)


def sequential_instant(make: Factory, turns: int) -> tuple[float, float]:
    """Wall and CPU seconds of ``turns`` turns one after another on an instant model."""
    graph, options = make(_common.EndlessModel())
    close = options.pop("_close", None)

    async def main() -> tuple[float, float]:
        await _run_turns(graph, WARMUP, "warm", False, options)
        wall, cpu = time.perf_counter(), time.process_time()
        await _run_turns(graph, turns, "seq", False, options)
        return time.perf_counter() - wall, time.process_time() - cpu

    try:
        return asyncio.run(main())
    finally:
        if close is not None:
            close()


class _Collections:
    """Seconds spent in the garbage collector while entered (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._start = 0.0

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._start

    def __enter__(self) -> _Collections:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)


def concurrent_slow(make: Factory, turns: int) -> tuple[float, float, float]:
    """Wall and CPU seconds of ``turns`` concurrent turns on a 50 ms model, and the seconds of
    garbage collection within them (all turns alive at once make full collections long)."""
    graph, options = make(_common.EndlessModel(latency=LATENCY))
    close = options.pop("_close", None)
    collections = _Collections()

    async def main() -> tuple[float, float]:
        await _run_turns(graph, WARMUP, "warm", True, options)
        start, cpu = time.perf_counter(), time.process_time()
        with collections:
            await _run_turns(graph, turns, "par", True, options)
        return time.perf_counter() - start, time.process_time() - cpu

    try:
        wall, cpu = asyncio.run(main())
        return wall, cpu, collections.seconds
    finally:
        if close is not None:
            close()


def rotated(items: list[Any], at: int) -> list[Any]:
    """``items`` started ``at`` places in (round ``at``'s order of the contenders): each
    contender runs first, second, ... in turn, since a pass runs a little slower after some
    contenders than after others (a heap the previous one grew, caches it left cold)."""
    at %= len(items) or 1
    return items[at:] + items[:at]


def run(quick: bool = False) -> list[dict[str, Any]]:
    """Sequential CPU, concurrent wall, the target and the longest loop step per contender.

    The concurrent pass runs ``ROUNDS`` times, the contenders' passes interleaved (in an order
    that rotates each round) and garbage collected before each: a value is the median over
    rounds, a ratio the median of the round-by-round ratios (a slow spell of the shared machine
    moves both sides of a round)."""
    turns = QUICK_TURNS if quick else TURNS
    rounds = QUICK_ROUNDS if quick else ROUNDS
    contenders: dict[str, Factory] = {
        "turnkit sync": turnkit_graph("sync"),
        "turnkit async": turnkit_graph("async"),
        "shape": shape,
        "shape in three steps": three_steps,
        "create_agent": agent_graph,
    }
    passes: dict[str, list[tuple[float, float, float]]] = {case: [] for case in contenders}
    for at in range(rounds):
        for case, make in rotated(list(contenders.items()), at):
            gc.collect()
            passes[case].append(concurrent_slow(make, turns))
    rows = []
    row = _common.row
    median = _common.median

    def paired(case: str, peer: str, at: int) -> float:
        """The median over rounds of ``case``'s wall (0) or CPU (1) over ``peer``'s."""
        return median([a[at] / b[at] for a, b in zip(passes[case], passes[peer], strict=True)])

    for case, make in contenders.items():
        seq_wall, seq_cpu = sequential_instant(make, turns)
        wall, cpu, collecting = (median([p[i] for p in passes[case]]) for i in range(3))
        lag = longest_step(make)
        target = SLACK * seq_cpu + MODEL_CALLS * 2 * LATENCY
        rows.append(row(SCENARIO, f"{case}: {turns} sequential, instant model, CPU", seq_cpu, "s"))
        rows.append(
            row(SCENARIO, f"{case}: {turns} sequential, instant model, wall", seq_wall, "s")
        )
        verdict: dict[str, Any] = {}
        if case == "turnkit sync":  # the default carries the target; the others are compared
            verdict = {"target": f"<= {target:.2f} s", "met": wall <= target}
        rows.append(
            row(
                SCENARIO,
                f"{case}: {turns} concurrent, 50 ms model, wall (÷ target)",
                wall,
                "s",
                ratio=wall / target,
                **verdict,
            )
        )
        rows.append(
            row(SCENARIO, f"{case}: CPU per turn in the concurrent run", cpu / turns * 1e3, "ms")
        )
        rows.append(
            row(SCENARIO, f"{case}: garbage collection within the concurrent run", collecting, "s")
        )
        rows.append(row(SCENARIO, f"{case}: longest event-loop step", lag * 1000, "ms"))
    for case, peer, label in [
        ("shape", "create_agent", "shape, turnkit's work removed: concurrent CPU per turn"),
        ("shape in three steps", "create_agent", "shape in three steps: concurrent CPU per turn"),
        ("turnkit sync", "shape", "turnkit sync: concurrent CPU per turn"),
    ]:
        why = ": the price of turnkit's own work" if peer == "shape" else ""
        per_turn = median([p[1] for p in passes[case]]) / turns * 1e3
        ratio = paired(case, peer, 1)
        own: dict[str, Any] = {}
        if peer == "shape":  # turnkit's own work, whatever LangGraph's steps cost
            own = {"target": f"<= {OWN_WORK:g}x", "met": round(ratio, 2) <= OWN_WORK}
        rows.append(row(SCENARIO, f"{label} (÷ {peer}{why})", per_turn, "ms", ratio=ratio, **own))
    for case in ("turnkit sync", "turnkit async"):
        wall = median([p[0] for p in passes[case]])
        rows.append(
            row(
                SCENARIO,
                f"{case}: concurrent wall (÷ create_agent)",
                wall,
                "s",
                ratio=paired(case, "create_agent", 0),
            )
        )
        ratio = paired(case, "create_agent", 1)
        verdict = {"target": "<= 1.0x", "met": ratio <= 1.0} if case == "turnkit sync" else {}
        rows.append(
            row(
                SCENARIO,
                f"{case}: concurrent CPU per turn (÷ create_agent)",
                median([p[1] for p in passes[case]]) / turns * 1e3,
                "ms",
                ratio=ratio,
                **verdict,
            )
        )
    return rows


if __name__ == "__main__":
    print(_common.format_table(run("--quick" in sys.argv)))
