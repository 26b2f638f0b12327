"""What the benchmarks share: an endless scripted model, one read and one write tool built for
turnkit and for LangChain alike, a PostgreSQL schema of their own, and the table printer.

Every scenario builds its contenders from these pieces, so they run the same model and the same
tool functions; only the machinery around them differs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import statistics
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun
from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_core.tools import StructuredTool

from turnkit import Executor, Registry, Settings, Tool
from turnkit.testing import ScriptedModel

__all__ = [
    "READ_TOOL",
    "SETTINGS",
    "WRITE_TOOL",
    "EndlessModel",
    "format_table",
    "langchain_tools",
    "median",
    "permissions",
    "postgres_note",
    "postgres_saver",
    "postgres_schema",
    "postgres_url",
    "read_then_answer",
    "row",
    "session_executor",
    "turnkit_executor",
]

READ_TOOL = "bench_get_item"
"""The read tool's name as the model sees it (turnkit: ``bench.get_item``)."""
WRITE_TOOL = "bench_set_price"
"""The write tool's name as the model sees it; present in every contender, never called."""
SKU_SCHEMA = {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"}

SETTINGS = Settings(rate_limit_units=1_000_000_000)
"""turnkit's defaults, with a rate limit so high that thousands of benchmark turns a minute never
reach it (the charge is still made and stored on every call)."""

POSTGRES_ENVS = ("TURNKIT_BENCH_POSTGRES_URL", "TURNKIT_TEST_POSTGRES_URL")


def get_item(sku: str) -> dict[str, Any]:
    """Look up one catalogue item by its SKU (price, stock)."""
    return {"sku": sku, "name": "Green tea, 100 g", "price": 4.5, "stock": 12}


def set_price(sku: str, price: float) -> dict[str, Any]:
    """Set the price of one catalogue item."""
    return {"sku": sku, "price": price}


def read_then_answer(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> Any:
    """One round of tools per turn: call the read tool after a user message, then answer."""
    if messages and isinstance(messages[-1], ToolMessage):
        return f"Done: {messages[-1].content[:40]}"
    return {"tool_calls": [{"name": READ_TOOL, "args": {"sku": "TEA-0001"}}]}


class EndlessModel(ScriptedModel):
    """A ``ScriptedModel`` with one step applied on every call, forever, recording nothing.

    ``latency`` seconds are awaited in every async call (the sync path is always instant).
    """

    latency: float = 0.0

    def __init__(self, step: Callable[..., Any] = read_then_answer, *, latency: float = 0.0):
        super().__init__([step], latency=latency)

    def reply(self, messages: list[BaseMessage], tools: list[dict[str, Any]]) -> Any:
        return self._message(self.steps[0](messages, tools))

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self.latency:
            await asyncio.sleep(self.latency)
        return self._generate(messages, stop, None, **kwargs)

    async def _astream(self, *args: Any, **kwargs: Any) -> Any:
        if self.latency:
            await asyncio.sleep(self.latency)
        chunk: ChatGenerationChunk
        async for chunk in super()._astream(*args, **kwargs):
            yield chunk


class BenchModule:
    """Module ``bench``: one read tool and one write tool, public (no rights) or, with
    ``admin=True``, behind a scope and a permission each (what a signed-in user's agent uses)."""

    key = "bench"

    def __init__(self, admin: bool = False) -> None:
        self.admin = admin

    def _rights(self, action: str, permission: str) -> dict[str, Any]:
        if not self.admin:
            return {"audience": "public"}
        return {"scope": f"bench.items:{action}", "permission": permission}

    def api_tools(self) -> list[Tool]:
        read = {"read_only": True}
        return [
            Tool(
                name="bench.get_item",
                **self._rights("read", "bench.view"),
                description=get_item.__doc__ or "",
                input_schema={
                    "type": "object",
                    "properties": {"sku": SKU_SCHEMA},
                    "required": ["sku"],
                    "additionalProperties": False,
                },
                annotations=read,
                handler=lambda input, ctx: get_item(**input),
            ),
            Tool(
                name="bench.set_price",
                **self._rights("write", "bench.manage"),
                description=set_price.__doc__ or "",
                input_schema={
                    "type": "object",
                    "properties": {"sku": SKU_SCHEMA, "price": {"type": "number"}},
                    "required": ["sku", "price"],
                    "additionalProperties": False,
                },
                handler=lambda input, ctx: set_price(**input),
            ),
        ]


def turnkit_executor(ledger: Any = None) -> Executor:
    """An executor over the ``bench`` module; its own ``MemoryLedger`` unless given a ledger."""
    return Executor(Registry([BenchModule()]), ledger=ledger, settings=SETTINGS)


SESSION_SETTINGS = dataclasses.replace(SETTINGS, api_session_write_modules=frozenset({"bench"}))
"""The session's executor: the agent may act in ``bench`` (its writes would be held)."""


def permissions(caller: Any) -> set[str]:
    """The application's permission provider of the session benchmarks (a plain function)."""
    return {"bench.view", "bench.manage"} if caller.user_id == "u_1" else set()


def session_executor(ledger: Any = None) -> Executor:
    """An executor over the admin ``bench`` module with a permission provider, for
    ``Caller.session("u_1")``: the agent case users run (rights checked on every call)."""
    return Executor(
        Registry([BenchModule(admin=True)]),
        ledger=ledger,
        settings=SESSION_SETTINGS,
        permissions=permissions,
    )


def langchain_tools() -> list[StructuredTool]:
    """The same two tools as LangChain tools, named as the model sees turnkit's."""
    return [
        StructuredTool.from_function(get_item, name=READ_TOOL),
        StructuredTool.from_function(set_price, name=WRITE_TOOL),
    ]


def median(values: list[float]) -> float:
    return statistics.median(values)


def row(
    scenario: str,
    case: str,
    value: float,
    unit: str,
    *,
    ratio: float | None = None,
    target: str | None = None,
    met: bool | None = None,
) -> dict[str, Any]:
    """One result row; ``ratio``, ``target`` and ``met`` only where they mean something."""
    found: dict[str, Any] = {"scenario": scenario, "case": case, "value": value, "unit": unit}
    if ratio is not None:
        found["ratio"] = ratio
    if target is not None:
        found["target"] = target
        found["met"] = met
    return found


RATIO_DIGITS = 2
"""The decimals a ratio is printed with (``3.00x``): a target on a ratio is judged on that."""


def ratio_at_least(ratio: float, target: float) -> bool:
    """Whether ``ratio`` meets ``target`` as the table prints it: ``2.996`` is shown ``3.00x``
    and meets 3, ``2.994`` is shown ``2.99x`` and does not — never ``3.00x`` beside a NO.

    Examples:
        >>> ratio_at_least(2.996, 3.0), ratio_at_least(2.994, 3.0)
        (True, False)
    """
    return round(ratio, RATIO_DIGITS) >= target


def _number(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}" if value >= 0.1 else f"{value:.3g}"


def format_table(rows: list[dict[str, Any]]) -> str:
    """The rows as one aligned text table: scenario, case, value, unit, ratio, target, met."""
    head = ("scenario", "case", "value", "unit", "ratio", "target", "met")
    cells = [
        (
            r["scenario"],
            r["case"],
            _number(r["value"]),
            r["unit"],
            "" if r.get("ratio") is None else f"{r['ratio']:.{RATIO_DIGITS}f}x",
            r.get("target") or "",
            "" if r.get("met") is None else ("yes" if r["met"] else "NO"),
        )
        for r in rows
    ]
    widths = [max(len(str(c[i])) for c in [head, *cells]) for i in range(len(head))]
    right = {2, 4}

    def line(values: tuple[str, ...]) -> str:
        parts = [
            str(v).rjust(w) if i in right else str(v).ljust(w)
            for i, (v, w) in enumerate(zip(values, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(head), rule, *(line(c) for c in cells)])


def postgres_url() -> str | None:
    """The PostgreSQL server to benchmark on, from the environment, or None."""
    for name in POSTGRES_ENVS:
        if os.environ.get(name):
            return os.environ[name]
    return None


def postgres_note() -> str:
    return f"PostgreSQL rows skipped: set {' or '.join(POSTGRES_ENVS)}"


def postgres_saver(url: str) -> tuple[Any, Any]:
    """A ``PostgresSaver`` on a pool of 8 connections set up as LangGraph needs, and the pool."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    pool = ConnectionPool(url, min_size=1, max_size=8, kwargs=kwargs, open=True)
    saver = PostgresSaver(pool)  # type: ignore[arg-type]
    saver.setup()
    return saver, pool


@contextmanager
def postgres_schema(base: str) -> Iterator[str]:
    """A URL whose ``search_path`` is a fresh schema, dropped (with its tables) afterwards."""
    import psycopg

    schema = f"bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    separator = "&" if "?" in base else "?"
    try:
        yield f"{base}{separator}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
