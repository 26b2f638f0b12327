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

import uuid
from collections.abc import Callable
from typing import Any, NamedTuple

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, RemoveMessage, ToolMessage

from turnkit.turn.messages import INTERRUPTED, call_ids, error_answer, tool_message
from turnkit.turn.state import HeldCall, RoundAnswer

__all__ = ["Unanswered", "recovered", "unanswered"]


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
        message_id = str(uuid.uuid4())
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
        fresh = last.model_copy(update={"id": str(uuid.uuid4())})
        removed: Any = RemoveMessage(id=last.id or "")  # AnyMessage does not name RemoveMessage
        return [removed, *fixes, fresh], holding
    return fixes, holding
