"""The floor of ``TurnkitMiddleware``: the promises it keeps on a tool call, written by hand.

What someone would write who needs the same promises in a ``create_agent`` agent and does not use
turnkit: one ``AgentMiddleware`` whose ``wrap_tool_call``, for the caller in the runtime context
(``context.caller``, with ``user_id``, ``kind`` and ``scopes`` as turnkit's ``Caller`` has them),

1. asks a permission provider for the caller's permissions **now** and checks the tool's
   permission (and a key's scope): refused otherwise;
2. checks the input against the tool's JSON schema (``jsonschema_rs``, each validator compiled
   once, as turnkit does): refused otherwise;
3. charges the call within the rate limit (refused when the window has no room) and, once it
   ended, writes its audit row (who called what, how it ended, how long it took); every call
   leaves one, refused or not;
4. runs the tool's function in a ``ThreadPoolExecutor`` and waits ``timeout`` seconds for it
   (``future.result(timeout=...)``), its result JSON-encoded into the ``ToolMessage``. The
   function is called directly, not through LangChain's ``tool.invoke`` (whose callbacks and
   argument model the schema check replaces), as ``TurnkitMiddleware`` calls its handler.

The storage of step 3 is a dict and a list under a lock (``InMemory``), or the REST floor's
(``Database``: ``bench/_floor.py``'s SQLite file or PostgreSQL pool, and its statements); the
charge and the audit row are one statement each: the charge before the function runs (so a full
window runs nothing), the audit row after it (so it says how the call ended). Idempotency,
holds, fitting the result, tracing and the operator's settings are left out: what stands between
this floor and turnkit's middleware is those, and turnkit's own way of doing the four steps.

Standard library, LangChain, the drivers and ``bench/_floor.py`` only: nothing from turnkit.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Awaitable, Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as HandlerTimeout
from dataclasses import dataclass, field
from typing import Any

import jsonschema_rs
from langchain.agents.middleware.types import AgentMiddleware
from langchain_core.messages import ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from bench import _floor

LIMIT = 1_000_000_000
"""Calls a caller may make in a window: more than any benchmark makes (the charge is still made)."""
WINDOW = 60
"""Seconds of a rate-limit window."""
TIMEOUT = 30.0
"""Seconds a tool's function may run (turnkit's default ``handler_timeout``)."""

SKU = {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"}


@dataclass(frozen=True)
class Rule:
    """What a tool asks of its caller: a permission, a scope (for API keys) and its input's
    JSON schema, compiled once."""

    permission: str
    scope: str
    schema: dict[str, Any]
    validator: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "validator", jsonschema_rs.validator_for(self.schema))


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": sorted(properties),
            "additionalProperties": False}  # fmt: skip


RULES = {
    "bench_get_item": Rule("bench.view", "bench.items:read", _object({"sku": SKU})),
    "bench_set_price": Rule(
        "bench.manage", "bench.items:write", _object({"sku": SKU, "price": {"type": "number"}})
    ),
}
"""The bench's two tools, by the name the model calls them, with the rules turnkit's
``bench._common.BenchModule(admin=True)`` gives them."""


class InMemory:
    """Usage in a dict and audit rows in a list, both under one lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.usage: dict[tuple[str, int], int] = {}
        self.rows: list[tuple[float, str, str, str, float]] = []

    def charge(self, caller: str, window_start: int, limit: int) -> bool:
        """One unit more for ``caller`` in the window, unless that would pass ``limit``."""
        with self.lock:
            units = self.usage.get((caller, window_start), 0) + 1
            if units > limit:
                return False
            self.usage[caller, window_start] = units
            return True

    def audit(self, at: float, caller: str, tool: str, status: str, duration_ms: float) -> None:
        with self.lock:
            self.rows.append((at, caller, tool, status, duration_ms))

    def close(self) -> None:
        pass


class Database:
    """The REST floor's storage at ``url`` (``bench._floor.store``: a SQLite file in WAL mode
    with a connection per thread, or PostgreSQL with a pool of up to 8 autocommit connections),
    charged and audited with its statements, each committing on its own."""

    def __init__(self, url: str) -> None:
        self.found = _floor.store(url)

    def charge(self, caller: str, window_start: int, limit: int) -> bool:
        return self.found.run(_floor.CHARGE, (caller, window_start, limit)) == 1

    def audit(self, at: float, caller: str, tool: str, status: str, duration_ms: float) -> None:
        self.found.run(_floor.AUDIT, (at, caller, tool, status, duration_ms))

    def read(self, sql: str) -> list[tuple[Any, ...]]:
        """What ``sql`` (no parameters) reads: how tests look at the usage and the audit."""
        return self.found.rows(sql)

    def close(self) -> None:
        self.found.close()


Store = InMemory | Database


class PromisesByHand(AgentMiddleware):
    """Rights, validation, a rate-limit charge, an audit row and a timeout on every call of a
    tool in ``rules``; calls of other tools run as they would without it."""

    def __init__(
        self,
        permissions: Callable[[Any], Collection[str]],
        store: Store,
        *,
        rules: dict[str, Rule] = RULES,
        limit: int = LIMIT,
        timeout: float = TIMEOUT,
    ) -> None:
        """``permissions``: the application's provider, asked with the caller on every call."""
        super().__init__()
        self.permissions, self.store, self.rules = permissions, store, rules
        self.limit, self.timeout = limit, timeout
        self.pool = ThreadPoolExecutor(4, thread_name_prefix="floor-handler")

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """A bench tool's call answered by ``governed``; any other passed on to ``handler``."""
        if request.tool_call["name"] not in self.rules:
            return handler(request)
        return self.governed(request)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """The sync path in a worker thread: it blocks on the database and on the function."""
        if request.tool_call["name"] not in self.rules:
            return await handler(request)
        return await asyncio.to_thread(self.governed, request)

    def governed(self, request: ToolCallRequest) -> ToolMessage:
        """The four steps of the module docstring for one call; its audit row written last."""
        call, started = request.tool_call, time.time()
        caller = request.runtime.context.caller
        who = f"user:{caller.user_id}"
        status, content = self._answer(request, caller, who, started)
        self.store.audit(started, who, call["name"], status, (time.time() - started) * 1000)
        return ToolMessage(content, tool_call_id=call["id"], name=call["name"],
                           status="success" if status == "ok" else "error")  # fmt: skip

    def _answer(
        self, request: ToolCallRequest, caller: Any, who: str, started: float
    ) -> tuple[str, str]:
        """``(status, content)``: ``("ok", the result's JSON)``, or why there is none."""
        name, args = request.tool_call["name"], request.tool_call["args"]
        refusal = self._refusal(caller, self.rules[name], args)
        if refusal is not None:
            return "refused", f"Error: {refusal}"
        if not self.store.charge(who, int(started // WINDOW), self.limit):
            return "rate_limited", "Error: the rate limit is reached; try again later"
        function = request.tool.func  # type: ignore[union-attr]  # the bench's StructuredTools
        future = self.pool.submit(function, **args)
        try:
            return "ok", json.dumps(future.result(timeout=self.timeout))
        except HandlerTimeout:
            return "timeout", f"Error: {name} did not finish within {self.timeout:g} s"
        except Exception as error:
            return "error", f"Error: {name} failed: {type(error).__name__}: {error}"

    def _refusal(self, caller: Any, rule: Rule, args: dict[str, Any]) -> str | None:
        """Why the caller may not make this call now, or None."""
        if rule.permission not in self.permissions(caller):
            return f"the caller lacks the permission {rule.permission!r}"
        if getattr(caller, "kind", None) == "key" and rule.scope not in caller.scopes:
            return f"the key lacks the scope {rule.scope!r}"
        if not rule.validator.is_valid(args):
            return "invalid input: " + "; ".join(
                e.message for e in rule.validator.iter_errors(args)
            )
        return None

    def close(self) -> None:
        """Stop taking calls (a function still running past its timeout finishes on its own);
        the store is its owner's to close."""
        self.pool.shutdown(wait=False)
