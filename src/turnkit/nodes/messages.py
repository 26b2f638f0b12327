"""What the model reads: tool messages built from answers, and the named templates of errors.

Every tool call is answered. A call the model got wrong becomes an error it can act on, worded by
one of the templates below; a held write becomes ``held_result``; anything else is the executor's
answer, fitted to ``agent_tool_result_chars``.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
)

from turnkit.nodes.tools import fit
from turnkit.registry import answers

UNKNOWN_TOOL = "There is no tool named {name!r}. Call one of the available tools: {available}."
NO_TOOLS = "There is no tool named {name!r}, and no tools are available to you in this turn."
NOT_AN_OBJECT = (
    "The arguments of {name!r} must be a JSON object, got {kind}. Send one JSON object that"
    " matches the tool's parameters."
)
INVALID_JSON = (
    "The arguments of {name!r} were not valid JSON ({error}). Send one JSON object that matches"
    " the tool's parameters."
)
SCHEMA = (
    "The arguments of {name!r} do not match its parameters; fix these and call it again: {listed}"
)
INTERRUPTED = (
    "This call was not answered: the turn was stopped (a timeout, a crash, or a new message)"
    " before it ran or before its result was kept. Check the data before calling it again."
)
ROUND_LIMIT = (
    "I stopped after {rounds} rounds of tool calls without reaching an answer, which is the limit"
    " for one turn. Tell me how to narrow the task, or ask me to continue."
)


def error_message(
    tool_call_id: str, code: answers.ErrorCode, text: str, **details: Any
) -> ToolMessage:
    """An error tool message from a template's ``text``."""
    return tool_message(tool_call_id, answers.error(code, text, **details))


def tool_message(tool_call_id: str, content: Any, *, message_id: str | None = None) -> ToolMessage:
    """A tool message whose content is the JSON of ``content``; errors are marked as such."""
    failed = isinstance(content, dict) and content.get("status") == "error"
    return ToolMessage(
        content=json.dumps(content, ensure_ascii=False, separators=(",", ":")),
        tool_call_id=tool_call_id,
        id=message_id or str(uuid.uuid4()),
        status="error" if failed else "success",
    )


def fitted(answer: dict[str, Any], limit: int) -> Any:
    """An answer as the model receives it (and the checkpoint keeps it)."""
    return fit(answer, limit)


def repaired(messages: list[AnyMessage]) -> list[AnyMessage]:
    """Updates that answer tool calls a stopped turn left unanswered, so the history stays valid.

    A model API refuses a history in which an assistant's tool call has no tool message. When a
    turn was cancelled or crashed between the model's call and its answers, and a new user message
    came after it, the tool messages go before that user message: the user message is removed
    and added again (with a new id) after them.
    """
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    missing = [
        call["id"]
        for m in messages
        if isinstance(m, AIMessage)
        for call in m.tool_calls
        if call.get("id") and call["id"] not in answered
    ]
    missing += [
        call["id"]
        for m in messages
        if isinstance(m, AIMessage)
        for call in m.invalid_tool_calls
        if call.get("id") and call["id"] not in answered
    ]
    if not missing:
        return []
    fixes: list[AnyMessage] = [error_message(cid, "in_progress", INTERRUPTED) for cid in missing]
    last = messages[-1]
    if isinstance(last, HumanMessage):
        fresh = last.model_copy(update={"id": str(uuid.uuid4())})
        return [RemoveMessage(id=last.id or ""), *fixes, fresh]
    return fixes


def last_ai(messages: list[AnyMessage]) -> AIMessage | None:
    """The latest AI message, when it is the last message."""
    if messages and isinstance(messages[-1], AIMessage):
        return messages[-1]
    return None


def kind_of(value: object) -> str:
    """How to name a JSON value's kind to a model."""
    names = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number" if isinstance(value, int | float) else "a value")
