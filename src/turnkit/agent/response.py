"""``Response``: what one prompt (or ``chat``) gives back."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

__all__ = ["PendingConfirmation", "Response", "ToolCallRecord"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallRecord:
    """One tool call the model made in the turn, and what it got back."""

    id: str
    """The tool call id."""
    name: str
    """The name the model used."""
    arguments: dict[str, Any]
    """The arguments it sent."""
    answer: Any = None
    """The JSON the model received for it (None while it is not answered)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class PendingConfirmation:
    """A write waiting for a person: decide it with ``Agent.confirm({id: decision})``."""

    id: str
    """The confirmation id."""
    tool: str
    """The registry name of the tool."""
    title: str
    """The tool's title."""
    arguments: dict[str, Any]
    """Exactly what will run on approval."""
    expires_at: str
    """ISO 8601 UTC time after which it can no longer be approved."""
    preview: dict[str, Any] | None = None
    """The tool's preview of the write, for the person (``{"value": ...}``, or
    ``{"unavailable": why}``); None when the tool declares none."""
    approvals: dict[str, Any] | None = None
    """For a write that needs several people: ``given``, ``needed``, ``separate_duties``."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Response:
    """The outcome of one turn."""

    content: str
    """The model's final text ("" while writes wait for a decision)."""
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    """Every tool call of the turn, in order."""
    usage: dict[str, int] = field(default_factory=dict)
    """Tokens of the turn's model calls added up: input_tokens, output_tokens, total_tokens."""
    parsed: Any = None
    """The validated structured output when a schema was given."""
    pending: list[PendingConfirmation] = field(default_factory=list)
    """Writes waiting for a decision; the turn goes on after ``Agent.confirm``."""
    messages: list[BaseMessage] = field(default_factory=list)
    """The turn's new messages."""

    @classmethod
    def of_turn(
        cls, messages: list[BaseMessage], interrupts: Any = None, *, final: Any = None
    ) -> Response:
        """The response for the messages a turn (or a resume) added, and its interrupt if it
        stopped at one; ``final`` is the conversation's last message (default: the last added).
        A resume reports only what it added: usage and tool calls are not counted twice."""
        answers = {m.tool_call_id: _json(m.content) for m in messages if isinstance(m, ToolMessage)}
        calls: list[ToolCallRecord] = []
        usage: dict[str, int] = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
        for message in messages:
            if not isinstance(message, AIMessage):
                continue
            for key in usage:
                counted = dict(message.usage_metadata or {}).get(key)
                usage[key] += counted if isinstance(counted, int) else 0
            for call in message.tool_calls:
                answer = answers.get(call["id"] or "")
                calls.append(
                    ToolCallRecord(
                        id=call["id"] or "",
                        name=call["name"],
                        arguments=call["args"],
                        answer=answer,
                    )
                )
        pending = [_pending(c) for i in interrupts or () for c in i.value.get("confirmations", [])]
        last = final if final is not None else (messages[-1] if messages else None)
        content = last.text if isinstance(last, AIMessage) and not pending else ""
        return cls(
            content=content, tool_calls=calls, usage=usage, pending=pending, messages=messages
        )


def _json(text: Any) -> Any:
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


def _pending(entry: dict[str, Any]) -> PendingConfirmation:
    return PendingConfirmation(
        id=entry["confirmation_id"],
        tool=entry["tool"],
        title=entry["title"],
        arguments=entry["arguments"],
        expires_at=entry["expires_at"],
        preview=entry.get("preview"),
        approvals=entry.get("approvals"),
    )
