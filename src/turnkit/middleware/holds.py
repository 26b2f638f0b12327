"""Held writes of a ``create_agent`` run: asked in one interrupt, decided once, put into the chat.

Runs before every model call, inside the model's step (``wrap_model_call``: a hook of its own,
``before_model``, would be one more graph step for every model call, each checkpointed, for a
turn that holds nothing), like the turn graph's ``await_confirmation`` and the reconciling part of
its ``list_tools``: a held call's tool message (marked by
``tool_calls.HELD_KEY``) whose confirmation was decided elsewhere, or expired, is replaced (same
message id) by the outcome; when the latest round held a write, every call still pending is asked
in one ``interrupt()`` whose payload is the turn graph's (versioned fields and LangChain's
``HITLRequest``), resumed with ``{confirmation_id: decision}`` or an ``HITLResponse``. Each decision
goes to ``Executor.decide`` as the run's caller. A decision the executor could not apply (an edit
that breaks the schema, a rate limit) or an id left out is asked about again at once, in a new
interrupt of the same hook, with the reason.

Everything before ``interrupt()`` only reads, so LangGraph may run the step again on resume; a
step that dies after a decision ran its write (the model failing, the process killed) runs again
and finds the decision in the ledger: the write runs once. The messages returned replace the held
notices in the model's request and, through the model step's update, in the state.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from turnkit.executor.answers import Answer
from turnkit.middleware.tool_calls import HELD_KEY
from turnkit.turn.bound import Bound
from turnkit.turn.held import ask_decisions, note_outcome, split_held
from turnkit.turn.messages import answered, tool_message
from turnkit.turn.state import HeldCall

__all__ = ["asettle", "settle"]

Marked = list[tuple[ToolMessage, HeldCall]]


def settle(messages: list[AnyMessage], runtime: Runtime[Any], bound: Bound) -> list[ToolMessage]:
    """Settle and ask about the held calls in ``messages``; the messages that replace theirs."""
    marked = _marked(messages)
    if not marked:
        return []
    executor = bound.executor
    held = [call for _, call in marked]
    found = [executor.confirmation(call["confirmation_id"]) for call in held]
    pending, done = split_held(held, found)
    problems: dict[str, str] = {}
    if _this_round(pending, messages):
        caller, allow = bound.caller(runtime)
        for _ in range(MAX_ASKS):  # each pass is one interrupt; LangGraph resumes them in order
            for cid, decision in ask_decisions(pending, held, bound, interrupt).items():
                answer = executor.decide(cid, caller, decision, allow=allow)
                note_outcome(cid, answer, executor.confirmation(cid), done, problems)
            pending = _still(pending, done, problems)
            if not pending:
                break
    if not done and not problems:
        return []
    limit = bound.both_settings(executor.ledger.settings())[1].agent_tool_result_chars
    return _update(marked, done, problems, limit)


async def asettle(
    messages: list[AnyMessage], runtime: Runtime[Any], bound: Bound
) -> list[ToolMessage]:
    """Async twin of ``settle``: the ledger is never read on the event loop."""
    marked = _marked(messages)
    if not marked:
        return []
    executor = bound.executor
    held = [call for _, call in marked]
    found = [await executor.aconfirmation(call["confirmation_id"]) for call in held]
    pending, done = split_held(held, found)
    problems: dict[str, str] = {}
    if _this_round(pending, messages):
        caller, allow = bound.caller(runtime)
        for _ in range(MAX_ASKS):  # each pass is one interrupt; LangGraph resumes them in order
            for cid, decision in ask_decisions(pending, held, bound, interrupt).items():
                answer = await executor.adecide(cid, caller, decision, allow=allow)
                note_outcome(cid, answer, await executor.aconfirmation(cid), done, problems)
            pending = _still(pending, done, problems)
            if not pending:
                break
    if not done and not problems:
        return []
    overrides = await executor.ledger.asettings()
    limit = bound.both_settings(overrides)[1].agent_tool_result_chars
    return _update(marked, done, problems, limit)


MAX_ASKS = 20
"""How often one model step asks about a round whose decisions could not all be applied (an invalid
edit, an id left out) before it lets the model run with the calls still held."""


def _still(
    pending: list[tuple[HeldCall, Any]], done: dict[str, Any], problems: dict[str, str]
) -> list[tuple[HeldCall, Any]]:
    """The calls of ``pending`` still waiting, each with why its last decision was not applied:
    asked again at once (the turn graph asks again in its next step), so none is left held with
    nobody asked."""
    still = []
    for call, confirmation in pending:
        cid = call["confirmation_id"]
        if cid not in done:
            still.append(({**call, "problem": problems[cid]} if cid in problems else call,
                          confirmation))  # fmt: skip
    return still


def _marked(messages: list[AnyMessage]) -> Marked:
    """Every tool message that still says its call is held, with the call."""
    found: Marked = []
    for message in messages:
        if not isinstance(message, ToolMessage) or not isinstance(message.artifact, dict):
            continue
        info = message.artifact.get(HELD_KEY)
        if not isinstance(info, dict):
            continue
        call = HeldCall(
            confirmation_id=str(info["confirmation_id"]),
            tool_call_id=message.tool_call_id,
            message_id=message.id or "",
            tool=str(info["tool"]),
        )
        if info.get("problem"):
            call["problem"] = str(info["problem"])
        found.append((message, call))
    return found


def _this_round(pending: list[tuple[HeldCall, Any]], messages: list[AnyMessage]) -> bool:
    """True when a pending call's tool message follows the latest AI message that made calls."""
    waiting = {call["message_id"] for call, _ in pending}
    for message in reversed(messages):
        if message.id in waiting:
            return True
        if isinstance(message, AIMessage) and message.tool_calls:
            return False
    return False


def _update(
    marked: Marked, done: dict[str, Answer], problems: dict[str, str], limit: int
) -> list[ToolMessage]:
    """The outcome in place of each decided call's message; the reason beside each refused one."""
    replaced: list[ToolMessage] = []
    for message, call in marked:
        cid = call["confirmation_id"]
        if cid in done:
            replaced.append(
                tool_message(
                    call["tool_call_id"],
                    answered(done[cid], limit),
                    name=message.name,
                    message_id=message.id,
                )
            )
        elif cid in problems:
            info = {**message.artifact[HELD_KEY], "problem": problems[cid]}
            replaced.append(message.model_copy(update={"artifact": {HELD_KEY: info}}))
    return replaced
