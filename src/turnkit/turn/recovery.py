"""A round that stopped before its answers were given, put right at the next turn's start.

A turn can stop between the model's tool calls and their tool messages: a timeout, a cancelled
run, a crash, or a new message sent while the run was still going. The next turn (``list_tools``)
must leave a history a model API accepts — every call answered — without losing what the round
did, above all a write held for a person:

- answers ``execute`` had given already (the round stopped before ``fit_results``) are given now;
- a call whose answer the ledger recorded under its idempotency key (``execute`` stopped after
  the executor answered) gets that answer; a held write is held again, on the same confirmation
  (or given its outcome when it was decided since), so it is never asked for twice;
- any other call is answered ``INTERRUPTED``: it may or may not have run (a plain read has no
  record; a write that was running when its process died is ``outcome_unknown`` in the ledger).

When a new user message came after the stopped round, the answers go before it (the message is
removed and added again, with a new id, after them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, RemoveMessage, ToolMessage

from turnkit.executor.answers import Answer, Held
from turnkit.ledger import Confirmation
from turnkit.registry import ids
from turnkit.turn.keys import idempotency_key
from turnkit.turn.messages import (
    INTERRUPTED,
    answered,
    call_ids,
    error_answer,
    settled,
    tool_message,
)
from turnkit.turn.state import HeldCall, PendingCall, RoundAnswer

__all__ = ["Unanswered", "held_ids", "ledger_lookups", "recorded", "recovered", "unanswered"]


class Unanswered(NamedTuple):
    """A tool call of a stopped round that has no tool message."""

    call_id: str
    name: str
    """The model name it called."""
    message_id: str
    """The id of the AI message that made it (part of its idempotency key)."""


def unanswered(messages: list[AnyMessage]) -> list[Unanswered]:
    """Every call without a tool message after its own AI message (ids repeat across messages
    with some servers, so a call is paired within its message's answers only)."""
    missing: list[Unanswered] = []
    waiting: dict[str, Unanswered] = {}
    for message in messages:
        if isinstance(message, AIMessage):
            missing += waiting.values()
            names = {c["id"]: c["name"] for c in message.tool_calls}
            names |= {c["id"]: str(c.get("name")) for c in message.invalid_tool_calls}
            waiting = {
                cid: Unanswered(cid, names.get(cid) or "", message.id or "")
                for cid in call_ids(message)
                if cid
            }
        elif isinstance(message, ToolMessage):
            waiting.pop(message.tool_call_id, None)
    return missing + list(waiting.values())


def recovered(
    messages: list[AnyMessage],
    missing: list[Unanswered],
    found: Callable[[str], RoundAnswer | None],
    names: dict[str, str] | None = None,
) -> tuple[list[AnyMessage], list[HeldCall]]:
    """The updates that answer ``missing`` (``found`` gives the answer known for a call id, or
    None)
    and the calls held again, for the turn's ``held`` (``names``: model name -> registry name)."""
    if not missing:
        return [], []
    fixes: list[AnyMessage] = []
    holding: list[HeldCall] = []
    for call in missing:
        answer = found(call.call_id) or error_answer("in_progress", INTERRUPTED)
        message_id = ids.uuid4_text()
        name = call.name or None
        fixes.append(tool_message(call.call_id, answer, name=name, message_id=message_id))
        if answer.get("held"):
            holding.append(
                HeldCall(
                    confirmation_id=answer["held"],
                    tool_call_id=call.call_id,
                    message_id=message_id,
                    tool=(names or {}).get(call.name, call.name),
                )
            )
    last = messages[-1]
    if isinstance(last, HumanMessage):
        fresh = last.model_copy(update={"id": ids.uuid4_text()})
        removed: Any = RemoveMessage(id=last.id or "")  # AnyMessage does not name RemoveMessage
        return [removed, *fixes, fresh], holding
    return fixes, holding


def ledger_lookups(
    messages: list[AnyMessage],
    leftover: dict[str, RoundAnswer],
    names: dict[str, str],
    thread: str | None,
) -> list[tuple[str, str, str]]:
    """``(call id, registry name, idempotency key)`` of each unanswered call whose answer the
    ledger may have recorded: a call of a known tool that the stopped round had not answered
    (``leftover``: the answers it had), on a thread (a call without one has no key)."""
    found = []
    for call in unanswered(messages):
        tool = names.get(call.name)
        pending = PendingCall(id=call.call_id, message_id=call.message_id, tool=tool or "", args={})
        key = idempotency_key(thread, pending)
        if call.call_id not in leftover and tool is not None and key is not None:
            found.append((call.call_id, tool, key))
    return found


def held_ids(leftover: dict[str, RoundAnswer], records: dict[str, Answer | None]) -> list[str]:
    """The confirmations of the stopped round's held answers, left over or recorded."""
    kept = [answer.get("held") for answer in leftover.values()]
    found = [a.confirmation_id for a in records.values() if isinstance(a, Held)]
    return [cid for cid in kept + found if cid is not None]


def recorded(
    leftover: dict[str, RoundAnswer],
    records: dict[str, Answer | None],
    decided: dict[str, Confirmation | None],
    limit: int,
) -> dict[str, RoundAnswer]:
    """The stopped round's answers as the model reads them, left over in the state or recorded
    in the ledger: a held write held again, or given the outcome of its confirmation when it was
    decided (or expired) since (``decided``: those confirmations, read again now)."""
    found: dict[str, RoundAnswer] = {}
    for call_id, answer in leftover.items():
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
