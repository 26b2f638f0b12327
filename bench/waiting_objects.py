"""Objects alive per call waiting in its handler: the garbage collector's share of a busy server.

Not part of ``python -m bench``'s table: a diagnostic. 200 async turns run at once, each one read
call whose async handler waits on one event; while all wait, the collector's tracked objects are
counted and, minus the count before (start-up frozen out with ``gc.freeze``), divided by the turns.
Every object a waiting call keeps is walked again at each full collection, so under hundreds of
concurrent turns this number is CPU (docs/architecture.md, "Little of a call but its own state is
alive across its handler's await"). Only public imports, so an older checkout runs it too:

    .venv/bin/python bench/waiting_objects.py [--turns N]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from turnkit import Caller, Executor, Registry, Tool
from turnkit.graph import TurnContext, build_turn_graph
from turnkit.testing import ScriptedModel

SCHEMA = {"type": "object", "properties": {"id": {"type": "string"}}, "additionalProperties": False}


class Waiting:
    """A module whose one read tool waits until ``gate`` opens, counting who arrived."""

    key = "shop"

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.arrived = 0

    async def get_item(self, input: dict[str, Any], ctx: Any) -> dict[str, Any]:
        self.arrived += 1
        await self.gate.wait()
        return {"id": input["id"]}

    def api_tools(self) -> list[Tool]:
        return [
            Tool(
                name="shop.get_item",
                audience="public",
                handler=self.get_item,
                annotations={"read_only": True},
                input_schema=SCHEMA,
            )
        ]


async def measure(turns: int) -> float:
    """Tracked objects per turn while ``turns`` turns wait in their handler."""
    module = Waiting()
    executor = Executor(Registry([module]))
    caller = Caller.public()

    def graph() -> Any:
        call = {"name": "shop_get_item", "args": {"id": "a"}}
        model = ScriptedModel([{"tool_calls": [call]}, "done"])  # a scripted model
        return build_turn_graph(executor, model, checkpointer=InMemorySaver())

    def run(g: Any, thread: str) -> Any:
        config = {"configurable": {"thread_id": thread}}
        context = TurnContext(caller=caller)
        return g.ainvoke({"messages": [HumanMessage("x")]}, config, context=context)

    graphs = [graph() for _ in range(turns)]
    module.gate.set()
    await run(graph(), "warm-up")  # first-use caches are not a call's objects
    module.gate.clear()
    arrived = module.arrived
    gc.collect()
    gc.freeze()
    before = len(gc.get_objects())
    tasks = [asyncio.create_task(run(g, f"t{n}")) for n, g in enumerate(graphs)]
    while module.arrived < arrived + turns:
        await asyncio.sleep(0.01)
    gc.collect()
    during = len(gc.get_objects())
    module.gate.set()
    await asyncio.gather(*tasks)
    executor.close()
    return (during - before) / turns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args()
    per_turn = asyncio.run(measure(args.turns))
    print(f"objects the collector tracks per waiting turn: {per_turn:.1f} ({args.turns} turns)")


if __name__ == "__main__":
    main()
