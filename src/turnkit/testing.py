"""Test doubles that users and turnkit's own tests share.

``ScriptedModel`` is a **scripted** chat model, not a real one: it answers from a list of steps, in
order, and records every call. It supports ``bind_tools``, ``invoke``/``ainvoke`` and streaming
with tool calls, and it fails loudly when called more often than scripted (``ScriptExhausted``) or
when steps are left over (``assert_done``).

Examples:
    >>> model = ScriptedModel([
    ...     {"tool_calls": [{"name": "catalogue_list_products", "args": {"limit": 2}}]},
    ...     "There are two products.",
    ... ])
    >>> model.invoke("hi").tool_calls[0]["name"]
    'catalogue_list_products'
    >>> model.invoke("and?").content
    'There are two products.'
    >>> model.assert_done()
"""

from __future__ import annotations

import itertools
import json
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import PrivateAttr

from turnkit.errors import TurnkitError

__all__ = ["ReplyModel", "ScriptExhausted", "ScriptedModel", "Step"]

Step = str | AIMessage | dict[str, Any] | Callable[[list[BaseMessage], list[dict[str, Any]]], Any]
"""A reply: text, an ``AIMessage``, a dict (``content``, ``tool_calls``, ``invalid_tool_calls``),
or a function of (messages, bound tools) returning one of those."""


class ScriptExhausted(TurnkitError, AssertionError):
    """The scripted model was called more often than its script has steps, or steps were left."""


class ReplyModel(BaseChatModel):
    """A chat model whose every answer comes from ``reply(messages, tools)``, sync or async,
    streamed as one chunk (tool calls included). The base of ``ScriptedModel`` and of the demo's
    scripted model; subclass it for a rule-based double of your own."""

    def reply(self, messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        """The next message for ``messages`` with ``tools`` bound."""
        raise NotImplementedError

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        """Bind tools as a real chat model would (OpenAI function format)."""
        return self.bind(tools=[convert_to_openai_tool(tool) for tool in tools], **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        message = self.reply(messages, kwargs.get("tools") or [])
        return ChatResult(generations=[ChatGeneration(message=message)])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._generate(messages, stop, None, **kwargs)

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        yield _chunk(self.reply(messages, kwargs.get("tools") or []))

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        yield _chunk(self.reply(messages, kwargs.get("tools") or []))


class ScriptedModel(ReplyModel):
    """A scripted chat model for tests and the offline demo (it is not a real model).

    Tool calls without an ``id`` get a fresh unique one, as real models give. ``calls`` records,
    for every model call, the messages it received and the tools bound to it.
    """

    steps: list[Any]
    """The replies, in order."""

    _position: int = PrivateAttr(default=0)
    _calls: list[dict[str, Any]] = PrivateAttr(default_factory=list)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _ids: Any = PrivateAttr(default_factory=lambda: itertools.count(1))

    def __init__(self, steps: Sequence[Step], **kwargs: Any) -> None:
        super().__init__(steps=list(steps), **kwargs)  # type: ignore[call-arg]  # a pydantic field

    @property
    def _llm_type(self) -> str:
        return "turnkit-scripted"

    @property
    def calls(self) -> list[dict[str, Any]]:
        """``[{"messages": [...], "tools": [...]}, ...]``, one per model call."""
        return list(self._calls)

    @property
    def remaining(self) -> int:
        """How many steps have not been used yet."""
        return len(self.steps) - self._position

    def assert_done(self) -> None:
        """Raise ``ScriptExhausted`` when some steps were never used."""
        if self.remaining:
            raise ScriptExhausted(
                f"the scripted model used {self._position} of {len(self.steps)} steps; the next"
                f" unused one is {self.steps[self._position]!r}"
            )

    def reply(self, messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        """The next step of the script, as an ``AIMessage``."""
        with self._lock:
            if self._position >= len(self.steps):
                last = messages[-1].content if messages else None
                raise ScriptExhausted(
                    f"the scripted model was called {self._position + 1} times but its script has"
                    f" {len(self.steps)} steps; the last message it got was {last!r:.200}"
                )
            step = self.steps[self._position]
            self._position += 1
            self._calls.append({"messages": list(messages), "tools": list(tools)})
        if callable(step):
            step = step(list(messages), list(tools))
        return self._message(step)

    def _message(self, step: Any) -> AIMessage:
        if isinstance(step, AIMessage):
            message = step
        elif isinstance(step, str):
            message = AIMessage(content=step)
        elif isinstance(step, dict):
            message = AIMessage(
                content=step.get("content", ""),
                tool_calls=[self._tool_call(call) for call in step.get("tool_calls", [])],
                invalid_tool_calls=[
                    {"type": "invalid_tool_call", "id": self._fresh_id(), "error": None, **call}
                    for call in step.get("invalid_tool_calls", [])
                ],
            )
        else:
            raise TypeError(f"a script step is text, an AIMessage or a dict, got {step!r:.100}")
        if message.id is None:
            message = message.model_copy(update={"id": f"scripted-{uuid.uuid4().hex}"})
        return message

    def _tool_call(self, call: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "tool_call",
            "name": call["name"],
            "args": call.get("args", {}),
            "id": call.get("id") or self._fresh_id(),
        }

    def _fresh_id(self) -> str:
        return f"call_{next(self._ids)}_{uuid.uuid4().hex[:8]}"


def _chunk(message: AIMessage) -> ChatGenerationChunk:
    """The whole message as one streamed chunk, tool calls included (as raw argument text); a
    chunk is streamed as it is, its argument text unparsed."""
    if isinstance(message, AIMessageChunk):
        return ChatGenerationChunk(message=message)
    chunks = [
        {"name": call["name"], "args": _json_text(call["args"]), "id": call["id"], "index": i}
        for i, call in enumerate(message.tool_calls)
    ]
    offset = len(chunks)
    chunks += [
        {"name": bad.get("name"), "args": bad.get("args"), "id": bad.get("id"), "index": offset + i}
        for i, bad in enumerate(message.invalid_tool_calls)
    ]
    return ChatGenerationChunk(
        message=AIMessageChunk(
            content=message.content,
            id=message.id,
            tool_call_chunks=chunks,  # type: ignore[arg-type]  # ToolCallChunk dicts
            usage_metadata=message.usage_metadata,
            response_metadata=message.response_metadata,
        )
    )


class _Token(str):
    """Text already written as JSON (a bracket, a separator, a key)."""


def _json_text(value: Any) -> str:
    """``json.dumps(value)``, also for arguments nested beyond the stack (a script may send what
    a hostile model sends): written then by a walk that does not recurse."""
    try:
        return json.dumps(value)
    except RecursionError:
        pass
    parts: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _Token):
            parts.append(item)
        elif isinstance(item, dict):
            parts.append("{")
            stack.append(_Token("}"))
            for n, (key, inner) in enumerate(reversed(item.items())):
                stack.extend([_Token(", ")] if n else [])
                stack.extend([inner, _Token(json.dumps({key: 0})[1:-2])])  # '"key": '
        elif isinstance(item, list | tuple):
            parts.append("[")
            stack.append(_Token("]"))
            for n, inner in enumerate(reversed(item)):
                stack.extend([_Token(", ")] if n else [])
                stack.append(inner)
        else:
            parts.append(json.dumps(item))
    return "".join(parts)
