"""The model's reply, made safe to keep and to run before ``call_model`` returns it.

``call_model``'s message is checkpointed before ``validate_args`` can answer it, so whatever in it a
checkpointer cannot store, or what must never run, is settled here (``checked_reply``):

- **Argument text that is not complete, valid JSON.** Invoked, LangChain refuses it (an invalid
  tool call). Streamed, it merges the chunks and repairs the text leniently: a reply cut off at
  ``'{"price": 35'`` became ``{"price": 35}``. ``StreamedArguments`` keeps the streamed chunks, and
  the calls are parsed again from their text, strictly, as ``invoke`` parses them.
- **A reply cut off at the model's output limit** (``finish_reason`` ``length``): its calls may be
  incomplete, so none of them runs.
- **Arguments outside the limits** of ``turnkit.registry.json_limits`` (nesting, 64-bit integers),
  which LangGraph's checkpointers cannot store.
- **Missing or repeated tool call ids** (``unique_call_ids``): a missing id is derived from the
  message id and the call's position; a later call repeating an id gets a new one and is refused
  (some servers repeat ids, and running both could do the work twice).
- **A message id used before in the thread** (some servers reuse completion ids; with
  ``add_messages`` semantics the reply would replace the earlier message): a new id.
- **Anything else no checkpointer keeps** (content, metadata, usage): replaced, with a warning.

A refused call moves to ``invalid_tool_calls`` with its argument text and, as its ``error``, the
reason after ``REFUSED``: ``validate_args`` answers it ``invalid_input`` with that reason.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.tool import InvalidToolCall, ToolCall, ToolCallChunk

from turnkit.registry import ids
from turnkit.registry.json_limits import MAX_DEPTH, json_problem
from turnkit.turn.messages import CUT_OFF, DUPLICATE, LIMITS, REFUSED

__all__ = [
    "CUT_OFF_REASONS",
    "UNWRITTEN",
    "StreamedArguments",
    "checked_reply",
    "may_stream",
    "unique_call_ids",
]

log = logging.getLogger("turnkit.model")

CUT_OFF_REASONS = frozenset({"length", "max_tokens", "max_output_tokens"})
"""Values (lower-cased) that say a reply was cut off at its output limit."""
CUT_OFF_KEYS = ("finish_reason", "stop_reason", "done_reason", "stopReason")
"""Where providers say why a reply ended: OpenAI and most servers (``finish_reason``), Anthropic
(``stop_reason``), Ollama (``done_reason``), Bedrock Converse (``stopReason``)."""
_PART_DEPTH = 100
"""Nesting allowed in a reply's content and metadata (checkpointers keep about 250 levels)."""
UNWRITTEN = "(arguments that cannot be written as JSON text)"
"""The argument text kept for a refused call whose arguments no JSON text can be made of."""

Call = ToolCall | InvalidToolCall
"""A call of a reply, valid or not."""


class StreamedArguments(BaseCallbackHandler):
    """Keeps the chunks of a streamed reply that carry tool calls, to read their argument text.

    Attach it to the model call's callbacks; after the call, ``tool_call_chunks()`` gives the
    merged chunks (raw argument text) of the reply that ended last, or None when it was not
    streamed (or called no tools).
    """

    run_inline = True  # record in the calling thread, also under an async callback manager

    def __init__(self) -> None:
        self._chunks: dict[UUID, list[AIMessageChunk]] = {}
        self._last: UUID | None = None

    def on_llm_new_token(
        self,
        token: str | list[str | dict[str, Any]],
        *,
        chunk: Any = None,
        run_id: UUID,
        **kwargs: Any,
    ) -> None:
        """Keep a streamed chunk that carries tool-call parts."""
        message = getattr(chunk, "message", None)
        if isinstance(message, AIMessageChunk) and message.tool_call_chunks:
            self._chunks.setdefault(run_id, []).append(message)

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """Note the run whose reply the model call returns (the last to end)."""
        self._last = run_id

    def tool_call_chunks(self) -> list[ToolCallChunk] | None:
        """The reply's tool-call chunks merged as LangChain merges them, argument text raw."""
        chunks = self._chunks.get(self._last) if self._last is not None else None
        if not chunks:
            return None
        merged = chunks[0] + chunks[1:] if len(chunks) > 1 else chunks[0]
        return list(merged.tool_call_chunks)


def may_stream(model: Any) -> bool:
    """True when ``model`` (a chat model, or one with tools bound) is set to stream every call:
    ``streaming=True``, or ``stream=True`` bound as a call argument."""
    while model is not None:
        if getattr(model, "streaming", False) is True:
            return True
        if (getattr(model, "kwargs", None) or {}).get("stream"):
            return True
        model = getattr(model, "bound", None)
    return False


def checked_reply(
    message: AIMessage,
    history: Sequence[BaseMessage],
    streamed: list[ToolCallChunk] | None = None,
    *,
    checkpoint_problem: Callable[[object], str | None],
) -> AIMessage:
    """``message`` as it may be stored and answered (see the module's doc); unchanged when fine.

    The calls are checked in one pass, in the order the model sent them (a streamed reply's
    chunks keep it), and split once into ``tool_calls`` and ``invalid_tool_calls``.

    Args:
        message: the model's reply.
        history: the thread's messages before it (for its id).
        streamed: the reply's merged tool-call chunks when it was streamed.
        checkpoint_problem: why the checkpointer could not store a value that is not plain JSON
            data, or None (``turnkit._compat.checkpoint_problem``: this package imports no
            LangGraph).
    """
    update: dict[str, Any] = {}
    if not message.id or any(earlier.id == message.id for earlier in history):
        update["id"] = f"turnkit-{ids.uuid4_text()}"
    message_id = update.get("id", message.id) or ""
    entries = _strict(streamed) if streamed is not None else _entries(message)
    refused = _refused(entries, _cut_off(message))
    unique = _unique_ids(refused or entries, message_id)
    if streamed is not None or refused is not None or unique is not None:
        update.update(_split(unique or refused or entries))
    update.update(_unstorable_parts(message, checkpoint_problem))
    return message.model_copy(update=update) if update else message


def unique_call_ids(message: AIMessage) -> AIMessage:
    """``message`` with an id on every call, unique within it; a repeated id's call refused.

    A missing id is derived from the message id and the call's position; a later call repeating
    an id gets ``<id>-<n>`` and, if it was valid, moves to ``invalid_tool_calls`` refused with
    ``DUPLICATE``. Returns ``message`` itself when every id is present and unique (always so
    for a message ``checked_reply`` made).
    """
    unique = _unique_ids(_entries(message), message.id or "")
    return message if unique is None else message.model_copy(update=_split(unique))


def _unique_ids(entries: list[Call], message_id: str) -> list[Call] | None:
    """``entries`` with every id present and unique (see ``unique_call_ids``); None when they
    are already."""
    ids = [call.get("id") for call in entries]
    if all(ids) and len(set(ids)) == len(ids):
        return None
    seen: set[str] = {cid for cid in ids if cid}
    used: set[str] = set()
    fixed: list[Call] = []
    for position, call in enumerate(entries):
        cid = call.get("id")
        if not cid:
            cid = _derived_id(message_id, position, seen)
            call = _with_id(call, cid)
        elif cid in used:
            new_id = _renamed(cid, seen)
            if call["type"] == "tool_call":
                call = _refuse(call, DUPLICATE.format(id=cid), new_id)
            else:
                call = _with_id(call, new_id)
            cid = new_id
        used.add(cid)
        fixed.append(call)
    return fixed


def _with_id(call: Call, cid: str) -> Call:
    """``call`` with the id ``cid`` (a copy)."""
    copy = call.copy()
    copy["id"] = cid
    return copy


def _split(entries: list[Call]) -> dict[str, list[Any]]:
    """The message fields of ``entries``, each list in their order."""
    return {
        "tool_calls": [call for call in entries if call["type"] == "tool_call"],
        "invalid_tool_calls": [call for call in entries if call["type"] == "invalid_tool_call"],
    }


def _entries(message: AIMessage) -> list[Call]:
    """The message's calls in answering order: ``tool_calls``, then ``invalid_tool_calls``."""
    return [*message.tool_calls, *message.invalid_tool_calls]


def _strict(chunks: list[ToolCallChunk]) -> list[Call]:
    """The calls of streamed chunks, their argument text parsed as ``invoke`` parses it."""
    calls: list[Call] = []
    for chunk in chunks:
        name, cid, text = chunk.get("name") or "", chunk.get("id"), chunk.get("args") or ""
        try:
            args = json.loads(text, strict=False) if text.strip() else {}
        except (ValueError, RecursionError):
            args = None
        if isinstance(args, dict):
            calls.append(ToolCall(name=name, args=args, id=cid, type="tool_call"))
        else:
            calls.append(
                InvalidToolCall(name=name, args=text, id=cid, error=None, type="invalid_tool_call")
            )
    return calls


def _cut_off(message: AIMessage) -> str | None:
    """The finish reason of a reply cut off at its output limit, else None."""
    metadata = message.response_metadata or {}
    for key in CUT_OFF_KEYS:
        reason = metadata.get(key)
        if isinstance(reason, str) and reason.lower() in CUT_OFF_REASONS:
            return reason
    return None


def _refused(calls: list[Call], cut_off: str | None) -> list[Call] | None:
    """``calls`` with every one that must not run refused; None when none is."""
    result: list[Call] = []
    changed = False
    for call in calls:
        if call["type"] == "tool_call":
            name = str(call.get("name"))[:100]
            if cut_off is not None:
                call = _refuse(call, CUT_OFF.format(reason=cut_off, name=name))
                changed = True
            elif (problem := json_problem(call["args"])) is not None:
                call = _refuse(call, LIMITS.format(name=name, problem=problem, depth=MAX_DEPTH))
                changed = True
        result.append(call)
    return result if changed else None


def _refuse(call: Call, reason: str, new_id: str | None = None) -> InvalidToolCall:
    """``call`` as an invalid tool call whose ``error`` gives ``reason`` to the model."""
    return InvalidToolCall(
        name=call.get("name"),
        args=_text(call.get("args")),
        id=new_id or call.get("id"),
        error=REFUSED + reason,
        type="invalid_tool_call",
    )


def _text(args: Any) -> str:
    """Arguments as JSON text (a call's record; never parsed again), a value that is not JSON
    written as its type's name; or ``UNWRITTEN`` for arguments no JSON text can be made of
    (nested beyond the stack, circular, a key that is not text). Never ``repr``: it overflows
    on nesting, as ``json.dumps`` does."""
    if isinstance(args, str):
        return args
    try:
        return json.dumps(args, ensure_ascii=False, default=_type_name)
    except (TypeError, ValueError, RecursionError):
        return UNWRITTEN


def _type_name(value: object) -> str:
    return f"<{type(value).__name__}>"


def _derived_id(message_id: str, position: int, taken: set[str]) -> str:
    digest = hashlib.blake2b(f"{message_id}\x00{position}".encode(), digest_size=8).hexdigest()
    cid = f"call_{digest}"
    return cid if cid not in taken else _renamed(cid, taken)


def _renamed(cid: str, taken: set[str]) -> str:
    """``<cid>-<n>`` for the smallest n >= 2 not taken; the new id is taken from now on."""
    n = 2
    while f"{cid}-{n}" in taken:
        n += 1
    taken.add(f"{cid}-{n}")
    return f"{cid}-{n}"


_PART_REPLACEMENTS: dict[str, Callable[[AIMessage], Any]] = {
    "content": lambda message: message.text,  # made only when needed: ``text`` is not free
    "additional_kwargs": lambda _: {},
    "response_metadata": lambda _: {},
    "usage_metadata": lambda _: None,
}
"""What replaces each part of a reply that could not be stored (a fresh value each time)."""


def _unstorable_parts(
    message: AIMessage, checkpoint_problem: Callable[[object], str | None]
) -> dict[str, Any]:
    """Replacements for the parts of ``message`` that a checkpointer could not store: the
    content becomes its plain text, metadata is dropped."""
    replaced: dict[str, Any] = {}
    for field, replacement in _PART_REPLACEMENTS.items():
        value = getattr(message, field)
        if isinstance(value, str) or not value:
            continue
        problem = json_problem(value, max_depth=_PART_DEPTH, other=checkpoint_problem)
        if problem is None:
            continue
        log.warning("the model's reply had %s that cannot be stored (%s): dropped", field, problem)
        replaced[field] = replacement(message)
    return replaced
