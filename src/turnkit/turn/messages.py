"""What the model reads: tool messages built from answers, and the named templates of errors.

Every tool call is answered. A call the model got wrong becomes an error it can act on, worded by
one of the templates below; a held write becomes ``held_result``; anything else is the executor's
answer, fitted to ``agent_tool_result_chars``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    HumanMessage,
    ToolMessage,
)

from turnkit.executor.answers import Answer, ErrorCode, Held, Refused, stored_outcome
from turnkit.ledger import Confirmation
from turnkit.registry import ids
from turnkit.registry.json_text import compact
from turnkit.registry.names import model_name
from turnkit.turn.state import RoundAnswer
from turnkit.turn.tools import fit_text, held_result

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


REFUSED = "turnkit refused this call: "
"""How ``call_model`` marks a call it refused in ``invalid_tool_calls`` (``error`` starts with it,
and the rest is what the model is told)."""
LIMITS = (
    "The arguments of {name!r} cannot be accepted ({problem}): nothing was run. Send plain JSON"
    " nested at most {depth} levels deep, with integers within 64 bits."
)
CUT_OFF = (
    "Your reply was cut off at its output limit (finish_reason {reason!r}), so the arguments of"
    " {name!r} may be incomplete: nothing was run. Call it again, with shorter arguments."
)
DUPLICATE = (
    "This call repeats the id {id!r} of an earlier call in the same message, so it was not run"
    " (running both could do the work twice). Call it again if you meant it."
)


def answered(answer: Answer, limit: int) -> RoundAnswer:
    """An answer as the model reads it: fitted JSON text (or ``held_result`` for a held call)."""
    match answer:
        case Held(confirmation_id=held):
            content = fit_text(held_result(held), limit)
            return RoundAnswer(content=content, status="success", held=held)
        case Refused():
            return RoundAnswer(content=fit_text(answer.to_json(), limit), status="error")
        case _:
            return RoundAnswer(content=fit_text(answer.to_json(), limit), status="success")


def error_answer(code: ErrorCode, text: str, **details: Any) -> RoundAnswer:
    """An error answer from a template's ``text`` (short: never fitted)."""
    error = Refused(code, text, details)
    return RoundAnswer(content=compact(error.to_json()), status="error")


def tool_message(
    tool_call_id: str, answer: RoundAnswer, *, name: str | None, message_id: str | None = None
) -> ToolMessage:
    """The tool message that gives ``answer`` to the call ``tool_call_id`` of the tool the model
    called ``name`` (its model-facing name; None when the model sent none)."""
    return ToolMessage(
        content=answer["content"],
        tool_call_id=tool_call_id,
        name=name,
        id=message_id or ids.uuid4_text(),
        status=answer["status"],
    )


def call_names(ai: AIMessage) -> dict[str, str]:
    """Tool call id -> the name the model called, for ``ai``'s valid and invalid calls (the
    first call with an id wins, as it is the one that runs)."""
    names: dict[str, str] = {}
    for call in [*ai.tool_calls, *ai.invalid_tool_calls]:
        cid, name = call.get("id") or "", call.get("name")
        if isinstance(name, str) and cid not in names:
            names[cid] = name[:100]
    return names


def held_name(tool: str) -> str:
    """The model-facing name of the registry tool ``tool`` (a held call's tool message)."""
    return model_name(tool) or tool


def settled(confirmation_id: str, confirmation: Confirmation | None) -> Answer:
    """The outcome a conversation sees of a held call whose confirmation is decided (or gone)."""
    if confirmation is None:
        return Refused("not_found", f"confirmation {confirmation_id!r} no longer exists")
    return stored_outcome(confirmation) or Refused(
        "in_progress", f"confirmation {confirmation_id!r} is still waiting for a decision"
    )


def call_ids(ai: AIMessage) -> list[str]:
    """The ids of ``ai``'s calls in the order they are answered: its ``tool_calls``, then its
    ``invalid_tool_calls`` (the order in which LangChain sends them back to a model)."""
    ids = [call.get("id") or "" for call in ai.tool_calls]
    return ids + [bad.get("id") or "" for bad in ai.invalid_tool_calls]


def last_ai(messages: list[AnyMessage]) -> AIMessage | None:
    """The latest AI message, when it is the last message."""
    if messages and isinstance(messages[-1], AIMessage):
        return messages[-1]
    return None


class Request(Mapping[str, str]):
    """The request that led to a round, for the approvers of a write it holds: the person's
    last message (``user``) and the model's text of the round (``model``), where there are
    some. Read from the messages only when asked (when a call is held: most calls are not);
    the executor bounds it (``Executor.call``'s ``request``)."""

    __slots__ = ("_messages", "_texts")

    def __init__(self, messages: list[AnyMessage]) -> None:
        self._messages = messages
        self._texts: dict[str, str] | None = None

    def _read(self) -> dict[str, str]:
        if self._texts is None:
            found: dict[str, str] = {}
            for message in reversed(self._messages):
                if not found and isinstance(message, AIMessage):
                    found["model"] = message.text
                elif isinstance(message, HumanMessage):
                    found["user"] = message.text
                    break
            self._texts = {part: text for part, text in found.items() if text.strip()}
        return self._texts

    def __getitem__(self, part: str) -> str:
        return self._read()[part]

    def __iter__(self) -> Iterator[str]:
        return iter(self._read())

    def __len__(self) -> int:
        return len(self._read())


def request_of(messages: list[AnyMessage]) -> Request:
    """The request that led to the round ``messages`` end with (``Request``, read lazily)."""
    return Request(messages)


def kind_of(value: object) -> str:
    """How to name a JSON value's kind to a model."""
    names = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number" if isinstance(value, int | float) else "a value")
