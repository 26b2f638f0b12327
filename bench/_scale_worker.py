"""One worker of ``bench/scale_out.py``: a plain process serving turnkit turns over HTTP, with its
checkpointer and ledger on the shared PostgreSQL (bounded pools), and nothing else shared.

``POST /turn {"thread": ..., "turn": n, "again": bool}`` runs turn ``n`` of a thread: the user asks
for order ``n``, the model (50 ms a call) places it with the write tool ``scale.place_order`` (an
API key's write: it runs at once, with the turn's idempotency key) and answers. The order is a row
in the table ``scale_orders``, written by the tool's handler in its own transaction: a real side
effect that a run done twice would show as a second row. The user message's id is ``thread:n``: a
request the client sends again (``again``: its first try failed) continues that turn from its
checkpoints if a worker died mid-turn (the same model reply, so the same idempotency keys); once
the turn has ended, it replaces the message in place, and the model says the order was placed
already.

At most ``--concurrency`` turns run at once in a worker (a bounded worker, like a pool of sync
workers): the run is latency-bound, and more workers serve more turns. A run on a thread another
worker holds waits for its lease (``busy_timeout``); no queue of our own.

    python bench/_scale_worker.py URL PORT [--concurrency 4] [--latency 0.05]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage

try:
    from bench import _common
except ModuleNotFoundError:  # run as a script: bench/ is sys.path[0], the repository is not
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench import _common

from turnkit import Caller, Executor, Registry, StaticPermissions, ThreadBusy, Tool
from turnkit.graph import TurnContext, build_turn_graph
from turnkit.storage import open_async_storage

ORDERS = (
    "CREATE TABLE IF NOT EXISTS scale_orders ("
    " thread_id TEXT NOT NULL, turn INTEGER NOT NULL, worker INTEGER NOT NULL)"
)
KEY = TurnContext(caller=Caller.key("scale-key", scopes={"scale.orders:write"}, user_id="shopper"))
RIGHTS = StaticPermissions({"shopper": {"scale.order"}})


class Orders:
    """Module ``scale``: one write tool whose handler inserts a row (pool of at most 4)."""

    key = "scale"

    def __init__(self, url: str) -> None:
        from psycopg_pool import ConnectionPool

        from turnkit.ledger.urls import postgres_target

        target = postgres_target(url)  # behind a pooler: no prepared statements
        self.pool = ConnectionPool(
            target.conninfo,
            kwargs={"autocommit": True, "prepare_threshold": None if target.pooler else 5},
            min_size=1,
            max_size=4,
            open=True,
            name="orders",
        )
        with self.pool.connection() as conn:
            conn.execute(ORDERS)

    def place(self, input: dict[str, Any], ctx: Any) -> dict[str, Any]:
        with self.pool.connection() as conn:
            conn.execute(
                "INSERT INTO scale_orders (thread_id, turn, worker) VALUES (%s, %s, %s)",
                (input["thread"], input["turn"], os.getpid()),
            )
        return {"placed": input["turn"]}

    def api_tools(self) -> list[Tool]:
        return [
            Tool(
                name="scale.place_order",
                scope="scale.orders:write",
                permission="scale.order",
                description="Place one order.",
                input_schema={
                    "type": "object",
                    "properties": {"thread": {"type": "string"}, "turn": {"type": "integer"}},
                    "required": ["thread", "turn"],
                    "additionalProperties": False,
                },
                handler=self.place,
            )
        ]


def order_then_answer(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> Any:
    """Place the order the last user message asks for; after its answer, say so."""
    last = messages[-1]
    if isinstance(last, HumanMessage):
        thread, _, turn = str(last.id).rpartition(":")
        args = {"thread": thread, "turn": int(turn)}
        return {"tool_calls": [{"name": "scale_place_order", "args": args}]}
    if isinstance(last, ToolMessage):
        if '"status":"error"' in str(last.content).replace(" ", ""):  # a crash cut the call off
            return f"Your order was interrupted and may not have gone through: {last.content}"
        return f"Order placed: {str(last.content)[:60]}"
    return "Your order was placed earlier."  # a request sent again after the turn had ended


async def cut_off(graph: Any, config: Any, message: HumanMessage) -> bool:
    """Whether ``message``'s turn is in the thread and did not finish (a worker died in it): it
    goes on from its checkpoints then, with the same model reply, so the same idempotency keys."""
    so_far = await graph.aget_state(config)
    seen = any(m.id == message.id for m in so_far.values.get("messages", []))
    return seen and bool(so_far.next)


def app(url: str, concurrency: int, latency: float) -> Any:
    """The worker's ASGI app (Starlette): ``POST /turn`` and ``GET /health``."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    state: dict[str, Any] = {}

    @contextlib.asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        storage = await open_async_storage(url)
        orders = await asyncio.to_thread(Orders, url)
        executor = Executor(
            Registry([orders]), ledger=storage.ledger, permissions=RIGHTS, settings=_common.SETTINGS
        )
        model = _common.EndlessModel(order_then_answer, latency=latency)
        state["graph"] = build_turn_graph(executor, model, checkpointer=storage.checkpointer)
        state["slots"] = asyncio.Semaphore(concurrency)
        try:
            yield
        finally:
            executor.close()
            await asyncio.to_thread(orders.pool.close)
            await storage.aclose()

    async def turn(request: Request) -> JSONResponse:
        body = await request.json()
        thread, n = str(body["thread"]), int(body["turn"])
        message = HumanMessage(f"Please place order {n}.", id=f"{thread}:{n}")
        config = {"configurable": {"thread_id": thread, "busy_timeout": 60}}
        graph = state["graph"]
        async with state["slots"]:
            request: Any = {"messages": [message]}
            if body.get("again") and await cut_off(graph, config, message):
                request = None  # LangGraph: go on from the thread's checkpoints
            try:
                out = await graph.ainvoke(request, config, context=KEY)
            except ThreadBusy as busy:
                return JSONResponse({"error": str(busy)}, status_code=409)
        return JSONResponse({"answer": out["messages"][-1].content, "worker": os.getpid()})

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"ok": "graph" in state})

    routes = [Route("/turn", turn, methods=["POST"]), Route("/health", health)]
    return Starlette(routes=routes, lifespan=lifespan)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("port", type=int)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--latency", type=float, default=0.05)
    args = parser.parse_args()
    import uvicorn

    uvicorn.run(
        app(args.url, args.concurrency, args.latency),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
    )


if __name__ == "__main__":
    main()
