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

from turnkit.executor.answers import Answer, AnswerJSON, Held, answer_from_json
from turnkit.ledger import Confirmation
from turnkit.nodes.state import TurnState
from turnkit.registry.settings import Settings
from turnkit.registry.tool import Tool
from turnkit.threads.leases import own_lease
from turnkit.turn.bound import Bound
from turnkit.turn.keys import idempotency_key
from turnkit.turn.messages import answered, held_name, settled, tool_message
from turnkit.turn.recovery import recovered, unanswered
from turnkit.turn.state import HeldCall, PendingCall, RoundAnswer
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
    lookups = _lookups(state, runtime)
    records = {cid: _read(executor.recorded(caller, tool, key)) for cid, tool, key in lookups}
    decided = {cid: executor.confirmation(cid) for cid in _held_ids(state, records)}
    recorded = _recorded(state, records, decided, turn.agent_tool_result_chars)
    return _update(state, tools, held, found, overrides, turn, recorded)


async def alist_tools(state: TurnState, runtime: Runtime[Any], *, bound: Bound) -> dict[str, Any]:
    """Async node: as ``list_tools``, without blocking the event loop."""
    caller, allow = bound.caller(runtime)
    executor = bound.executor
    read = _read_with_the_lease()
    overrides, tools = await executor.atools_now(caller, allow, read)  # the run's settings read
    turn = bound.both_settings(overrides)[1]
    held = state.get("held") or []
    found = [await executor.aconfirmation(h["confirmation_id"]) for h in held]
    lookups = _lookups(state, runtime)
    records = {
        cid: _read(await executor.arecorded(caller, tool, key)) for cid, tool, key in lookups
    }
    decided = {cid: await executor.aconfirmation(cid) for cid in _held_ids(state, records)}
    recorded = _recorded(state, records, decided, turn.agent_tool_result_chars)
    return _update(state, tools, held, found, overrides, turn, recorded)


def _read_with_the_lease() -> dict[str, Any] | None:
    """The settings the run's lease read in its own round trip (PostgreSQL), if it did (not a
    lease of another thread's run this one is nested in: that may be another ledger's)."""
    lease = own_lease(get_config())
    return None if lease is None else lease.overrides


def _lookups(state: TurnState, runtime: Runtime[Any]) -> list[tuple[str, str, str]]:
    """``(call id, registry name, idempotency key)`` of each unanswered call whose answer the
    ledger may have recorded (a call this round had not answered yet)."""
    leftover = state.get("answers") or {}
    names = state.get("tool_names") or {}
    thread = getattr(getattr(runtime, "execution_info", None), "thread_id", None)
    found = []
    for call in unanswered(state.get("messages") or []):
        tool = names.get(call.name)
        pending = PendingCall(id=call.call_id, message_id=call.message_id, tool=tool or "", args={})
        key = idempotency_key(thread, pending)
        if call.call_id not in leftover and tool is not None and key is not None:
            found.append((call.call_id, tool, key))
    return found


def _read(record: AnswerJSON | None) -> Answer | None:
    """An answer the ledger recorded, read back (None when there is none)."""
    return None if record is None else answer_from_json(record)


def _held_ids(state: TurnState, records: dict[str, Answer | None]) -> list[str]:
    """The confirmations of the stopped round's held answers, left over or recorded."""
    leftover = [answer.get("held") for answer in (state.get("answers") or {}).values()]
    recorded = [a.confirmation_id for a in records.values() if isinstance(a, Held)]
    return [cid for cid in leftover + recorded if cid is not None]


def _recorded(
    state: TurnState,
    records: dict[str, Answer | None],
    decided: dict[str, Confirmation | None],
    limit: int,
) -> dict[str, RoundAnswer]:
    """The stopped round's answers as the model reads them, left over in the state or recorded
    in the ledger: a held write held again, or given the outcome of its confirmation when it was
    decided (or expired) since."""
    found: dict[str, RoundAnswer] = {}
    for call_id, answer in (state.get("answers") or {}).items():
        confirmation_id = answer.get("held")
        settled_now = confirmation_id is not None and _settled(confirmation_id, decided)
        found[call_id] = answered(settled_now, limit) if settled_now else answer
    for call_id, record in records.items():
        if isinstance(record, Held):  # held again, or the outcome of its confirmation
            found[call_id] = answered(_settled(record.confirmation_id, decided) or record, limit)
        elif record is not None:
            found[call_id] = answered(record, limit)
    return found


def _settled(confirmation_id: str, decided: dict[str, Confirmation | None]) -> Answer | None:
    """The outcome of a confirmation decided (or gone) since, else None while it waits."""
    confirmation = decided.get(confirmation_id)
    if confirmation is not None and confirmation.outcome is None:
        return None
    return settled(confirmation_id, confirmation)


def _update(
    state: TurnState,
    tools: list[Tool],
    held: list[HeldCall],
    found: list[Confirmation | None],
    overrides: dict[str, Any],
    settings: Settings,
    recorded: dict[str, RoundAnswer],
) -> dict[str, Any]:
    limit = settings.agent_tool_result_chars
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
    replaced: list[Any] = []
    still = []
    for call, confirmation in zip(held, found, strict=True):
        if confirmation is None or confirmation.outcome is not None:
            outcome = settled(call["confirmation_id"], confirmation)
            replaced.append(
                tool_message(
                    call["tool_call_id"],
                    answered(outcome, limit),
                    name=held_name(call["tool"]),
                    message_id=call["message_id"],
                )
            )
        else:
            still.append(call)
    names = state.get("tool_names") or {}
    fixes, holding = recovered(messages, unanswered(messages), recorded.get, names)
    if held or holding:
        update["held"] = still + holding
    changes = replaced + fixes
    if changes:
        update["messages"] = changes
    return update
