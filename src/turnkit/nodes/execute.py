"""``execute``: run the round's valid calls concurrently through the executor.

Each call's idempotency key is derived from the thread, the AI message and the tool call id, so a
node that LangGraph runs again — after a crash, or on a resume — replays the recorded answer
instead of writing twice. A plain read (``read_only``, no ``danger``: never held, nothing to do
twice) goes without a key: reading again after a crash is harmless, and it spares the ledger two
round trips per call. Before the round the run is settled (``settle_run``): a run that lost its
thread to another stops before it writes, and the checkpoints its saver held back (the model's
message that asked for these calls among them) are saved first. Answers are fitted here
already, as the JSON text the model will read, so an oversized result (or one no checkpointer
stores, like a huge integer) never reaches the checkpoint.
"""

from __future__ import annotations

import asyncio
import hashlib
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from langgraph.config import get_config
from langgraph.runtime import Runtime

from turnkit.nodes.bound import Bound
from turnkit.nodes.messages import answered
from turnkit.nodes.tools import held
from turnkit.registry._steps import KEY_LIMIT
from turnkit.turn.leases import asettle_run, settle_run
from turnkit.turn.state import PendingCall, TurnState

__all__ = ["aexecute", "execute", "idempotency_key", "thread_of"]


def idempotency_key(thread_id: str | None, call: PendingCall) -> str | None:
    """The key of one tool call of one thread; None without a thread (nothing to resume).

    A key is at most 254 characters (the ledger keeps 255; a key of 255 was cut by an older
    version): when the ids make it longer, the message and call ids — and, for a very long
    thread id, the thread too — are replaced by their SHA-256, never cut, so two calls never share
    a key."""
    if not thread_id:
        return None
    key = f"turn:{thread_id}:{call['message_id']}:{call['id']}"
    if len(key) < KEY_LIMIT:
        return key
    digest = hashlib.sha256(f"{thread_id}\0{call['message_id']}\0{call['id']}".encode()).hexdigest()
    key = f"turn:{thread_id}:sha256:{digest}"
    return key if len(key) < KEY_LIMIT else f"turn-sha256:{digest}"


def thread_of(key: str | None) -> str | None:
    """The thread of a call's ``idempotency_key`` when the turn graph made it, else None."""
    if not key or not key.startswith("turn:") or len(key) >= KEY_LIMIT:  # an old cut key
        return None
    parts = key.removeprefix("turn:").rsplit(":", 2)
    return parts[0] if len(parts) == 3 else None


def _control(runtime: Runtime[Any], call: PendingCall, bound: Bound) -> dict[str, Any]:
    tool = bound.executor.registry.get(call["tool"])
    if tool is not None and tool.never_held:
        return {}
    key = idempotency_key(_thread(runtime), call)
    return {} if key is None else {"idempotency_key": key}


def _thread(runtime: Runtime[Any]) -> str | None:
    """The run's thread id, when it has one."""
    return getattr(getattr(runtime, "execution_info", None), "thread_id", None)


def execute(state: TurnState, runtime: Runtime[Any], *, bound: Bound) -> dict[str, Any]:
    """Sync node: every valid call of the round, run at once in threads."""
    calls = state.get("calls") or []
    if not calls:
        return {}
    caller, allow = bound.caller(runtime)
    executor = bound.executor
    settings, turn = bound.turn_settings(state)
    settle_run(get_config())  # the state that asked for this round is saved first

    thread = _thread(runtime)

    def run(call: PendingCall) -> dict[str, Any]:
        control = _control(runtime, call, bound)
        return executor.execute(
            caller, call["tool"], call["args"], control, allow=allow, settings=settings,
            thread=thread,
        )  # fmt: skip

    if len(calls) == 1:
        results = [run(calls[0])]
    else:
        with ThreadPoolExecutor(min(len(calls), 8), thread_name_prefix="turnkit-round") as pool:
            results = list(pool.map(run, calls))
    return _answers(state, calls, results, turn.agent_tool_result_chars)


async def aexecute(state: TurnState, runtime: Runtime[Any], *, bound: Bound) -> dict[str, Any]:
    """Async node: every valid call of the round at once, without blocking the event loop."""
    calls = state.get("calls") or []
    if not calls:
        return {}
    caller, allow = bound.caller(runtime)
    executor = bound.executor
    settings, turn = await bound.aturn_settings(state)
    await asettle_run(get_config())
    thread = _thread(runtime)
    runs = []  # a loop, not a closure: this frame lives across the handlers' awaits, and a
    for call in calls:  # closure would keep its locals as cells for the collector to walk
        control = _control(runtime, call, bound)
        ran = executor.aexecute(
            caller, call["tool"], call["args"], control, allow=allow, settings=settings,
            thread=thread,
        )  # fmt: skip
        runs.append(ran)
    # one call is awaited here: a task of its own would cost a turn of the loop
    results = [await runs[0]] if len(runs) == 1 else list(await asyncio.gather(*runs))
    return _answers(state, calls, results, turn.agent_tool_result_chars)


def _answers(
    state: TurnState, calls: list[PendingCall], results: list[dict[str, Any]], limit: int
) -> dict[str, Any]:
    """The round's answers: the errors of ``validate_args`` and these results, fitted as text."""
    found = dict(state.get("answers") or {})
    for call, answer in zip(calls, results, strict=True):
        found[call["id"]] = answered(answer, limit, held=held(answer))
    return {"answers": found, "calls": []}
