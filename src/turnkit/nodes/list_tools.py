"""``list_tools``: at the start of a turn, list the tools the caller may use now.

Also settles what earlier rounds left (``turn/recovery.py``): a round stopped before its answers
were given gets them, a held write held again on its confirmation. And reconciles writes held in
earlier turns (a new user message was sent instead of a resume): a confirmation decided since —
from the CLI, another process — gets its held tool message replaced by the outcome, and so does one
that expired meanwhile (``confirmation_expired``, once); one still pending stays held and is listed
again in the next interrupt. And repairs a history that a stopped turn left invalid: tool calls
without answers get one.
"""

from __future__ import annotations

from typing import Any

from langgraph.config import get_config
from langgraph.runtime import Runtime

from turnkit.executor.answers import Answer, AnswerJSON, answer_from_json
from turnkit.ledger import Confirmation
from turnkit.nodes.state import TurnState
from turnkit.registry.settings import Settings
from turnkit.registry.tool import Tool
from turnkit.threads.leases import own_lease
from turnkit.turn.bound import Bound
from turnkit.turn.held import replace_settled, split_held
from turnkit.turn.recovery import held_ids, ledger_lookups, recorded, recovered, unanswered
from turnkit.turn.state import HeldCall, RoundAnswer
from turnkit.turn.tools import for_model

__all__ = ["alist_tools", "list_tools"]


def list_tools(state: TurnState, runtime: Runtime[Any], *, bound: Bound) -> dict[str, Any]:
    """Sync node: the caller's tools now, and what earlier rounds and turns left to settle."""
    caller, allow = bound.caller(runtime)
    executor = bound.executor
    read = _read_with_the_lease()
    overrides, tools = executor.tools_now(caller, allow, read)  # the run's one settings read
    turn = bound.both_settings(overrides)[1]
    held = state.get("held") or []
    found = [executor.confirmation(h["confirmation_id"]) for h in held]
    leftover = state.get("answers") or {}
    lookups = _lookups(state, runtime)
    records = {cid: _read(executor.recorded(caller, tool, key)) for cid, tool, key in lookups}
    decided = {cid: executor.confirmation(cid) for cid in held_ids(leftover, records)}
    answers = recorded(leftover, records, decided, turn.agent_tool_result_chars)
    return _update(state, tools, held, found, overrides, turn, answers)


async def alist_tools(state: TurnState, runtime: Runtime[Any], *, bound: Bound) -> dict[str, Any]:
    """Async node: as ``list_tools``, without blocking the event loop."""
    caller, allow = bound.caller(runtime)
    executor = bound.executor
    read = _read_with_the_lease()
    overrides, tools = await executor.atools_now(caller, allow, read)  # the run's settings read
    turn = bound.both_settings(overrides)[1]
    held = state.get("held") or []
    found = [await executor.aconfirmation(h["confirmation_id"]) for h in held]
    leftover = state.get("answers") or {}
    lookups = _lookups(state, runtime)
    records = {
        cid: _read(await executor.arecorded(caller, tool, key)) for cid, tool, key in lookups
    }
    decided = {cid: await executor.aconfirmation(cid) for cid in held_ids(leftover, records)}
    answers = recorded(leftover, records, decided, turn.agent_tool_result_chars)
    return _update(state, tools, held, found, overrides, turn, answers)


def _read_with_the_lease() -> dict[str, Any] | None:
    """The settings the run's lease read in its own round trip (PostgreSQL), if it did (not a
    lease of another thread's run this one is nested in: that may be another ledger's)."""
    lease = own_lease(get_config())
    return None if lease is None else lease.overrides


def _lookups(state: TurnState, runtime: Runtime[Any]) -> list[tuple[str, str, str]]:
    """Where the ledger may have recorded the answers of the stopped round's unanswered calls."""
    thread = getattr(getattr(runtime, "execution_info", None), "thread_id", None)
    messages = state.get("messages") or []
    return ledger_lookups(
        messages, state.get("answers") or {}, state.get("tool_names") or {}, thread
    )


def _read(record: AnswerJSON | None) -> Answer | None:
    """An answer the ledger recorded, read back (None when there is none)."""
    return None if record is None else answer_from_json(record)


def _update(
    state: TurnState,
    tools: list[Tool],
    held: list[HeldCall],
    found: list[Confirmation | None],
    overrides: dict[str, Any],
    settings: Settings,
    answers: dict[str, RoundAnswer],
) -> dict[str, Any]:
    messages = state.get("messages") or []
    definitions, by_name = for_model(tools)
    update: dict[str, Any] = {
        "tools": definitions,
        "tool_names": {name: tool.name for name, tool in by_name.items()},
        "round": 0,
        "calls": [],
        "answers": {},
        "overrides": overrides,
    }
    _, done = split_held(held, found)
    replaced, still = replace_settled(held, done, {}, settings.agent_tool_result_chars)
    names = state.get("tool_names") or {}
    fixes, holding = recovered(messages, unanswered(messages), answers.get, names)
    if held or holding:
        update["held"] = still + holding
    changes = replaced + fixes
    if changes:
        update["messages"] = changes
    return update
