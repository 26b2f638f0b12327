"""``execute``: run the round's valid calls concurrently through the executor.

Each call's idempotency key is derived from the thread, the AI message and the tool call id, so a
node that LangGraph runs again — after a crash, or on a resume — replays the recorded answer
instead of writing twice. A plain read (``read_only``, no ``danger``: never held, nothing to do
twice) goes without a key: reading again after a crash is harmless, and it spares the ledger two
round trips per call. Before the round the run is settled (``settle_run``): a run that lost its
thread to another stops before it writes, and the checkpoints its saver deferred (the model's
message that asked for these calls among them) are saved first. Answers are fitted here
already, as the JSON text the model will read, so an oversized result (or one no checkpointer
stores, like a huge integer) never reaches the checkpoint.
"""

from __future__ import annotations

import asyncio
import contextvars
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from langgraph.config import get_config
from langgraph.runtime import Runtime

from turnkit.executor.answers import Answer
from turnkit.nodes.state import TurnState
from turnkit.threads.leases import asettle_run, settle_run
from turnkit.turn.bound import Bound
from turnkit.turn.keys import idempotency_key
from turnkit.turn.messages import answered, request_of
from turnkit.turn.state import PendingCall

__all__ = ["aexecute", "execute"]


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
    asked = request_of(state.get("messages") or [])

    def run(call: PendingCall) -> Answer:
        control = _control(runtime, call, bound)
        return executor.call(
            caller, call["tool"], call["args"], control, allow=allow, settings=settings,
            thread=thread, request=asked,
        )  # fmt: skip

    if len(calls) == 1:
        results = [run(calls[0])]
    else:
        here = contextvars.copy_context()  # each call's spans nest under this run's
        with ThreadPoolExecutor(min(len(calls), 8), thread_name_prefix="turnkit-round") as pool:
            results = list(pool.map(lambda call: here.copy().run(run, call), calls))
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
    asked = request_of(state.get("messages") or [])
    runs = []  # a loop, not a closure: this frame lives across the handlers' awaits, and a
    for call in calls:  # closure would keep its locals as cells for the collector to walk
        control = _control(runtime, call, bound)
        ran = executor.acall(
            caller, call["tool"], call["args"], control, allow=allow, settings=settings,
            thread=thread, request=asked,
        )  # fmt: skip
        runs.append(ran)
    # one call is awaited here: a task of its own would cost a turn of the loop
    results = [await runs[0]] if len(runs) == 1 else list(await asyncio.gather(*runs))
    return _answers(state, calls, results, turn.agent_tool_result_chars)


def _answers(
    state: TurnState, calls: list[PendingCall], results: list[Answer], limit: int
) -> dict[str, Any]:
    """The round's answers: the errors of ``validate_args`` and these results, fitted as text."""
    found = dict(state.get("answers") or {})
    for call, answer in zip(calls, results, strict=True):
        found[call["id"]] = answered(answer, limit)
    return {"answers": found, "calls": []}
