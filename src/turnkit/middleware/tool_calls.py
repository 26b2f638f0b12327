"""One tool call of a ``create_agent`` run, answered the way the turn graph answers it.

The caller's tools are listed now (rights at call time); a call of an unknown or hidden tool,
arguments that are not an object or break the schema get an error the model can act on (the turn
graph's templates); a valid call runs through the executor with an idempotency key made of the
thread, the AI message and the call id (``turn/keys.py``, as the graph's ``execute`` node makes
it), so a tools node that LangGraph runs again after a crash or a resume replays the recorded
answer instead of writing twice. The answer is fitted to ``agent_tool_result_chars``. A held
write's message carries the confirmation in its ``artifact`` (``HELD_KEY``), where ``holds.py``
finds it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import StructuredTool

from turnkit.executor.answers import Answer, Held
from turnkit.registry.caller import Caller
from turnkit.registry.settings import Settings
from turnkit.registry.tool import Tool
from turnkit.registry.visibility import Allow
from turnkit.turn.bound import Bound
from turnkit.turn.checks import call_problem
from turnkit.turn.keys import idempotency_key
from turnkit.turn.messages import (
    UNKNOWN_TOOL,
    answered,
    error_answer,
    request_of,
    tool_message,
)
from turnkit.turn.state import PendingCall
from turnkit.turn.tools import arguments, for_model

__all__ = ["HELD_KEY", "Run", "finish", "message_id", "placeholders", "prepare"]

HELD_KEY = "turnkit_held"
"""The key of a held call's ``ToolMessage.artifact``: ``{"confirmation_id", "tool"}``."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Run:
    """A valid call, ready for ``Executor.call`` (or ``acall``)."""

    caller: Caller
    allow: Allow
    tool: str
    """The registry name."""
    input: dict[str, Any]
    control: dict[str, Any]
    """The idempotency key, unless the tool is a plain read."""
    settings: Settings
    """The executor's settings with the operator's overrides."""
    limit: int
    """The result budget (``agent_tool_result_chars``)."""
    call_id: str
    model_name: str
    thread: str | None = None
    """The conversation the call belongs to (kept with a hold)."""
    request: Mapping[str, str] | None = None
    """The request that led to the call (``turn.messages.request_of``; kept with a hold)."""


def placeholders(tools: Iterable[Tool]) -> list[StructuredTool]:
    """A stand-in for each registry tool a model can call, so ``create_agent`` builds its tools
    node and routes the calls to it; the middleware answers them, a stand-in never runs."""
    definitions, _ = for_model(tools)

    def never(**_: Any) -> Any:
        raise RuntimeError("a turnkit tool runs only through TurnkitMiddleware.wrap_tool_call")

    return [
        StructuredTool.from_function(
            func=never,
            name=d["function"]["name"],
            description=d["function"]["description"] or d["function"]["name"],
            args_schema=d["function"]["parameters"],
        )
        for d in definitions
    ]


def prepare(
    call: Any,
    state: Any,
    thread: str | None,
    caller: tuple[Caller, Allow],
    listed: tuple[dict[str, Any], list[Tool]],
    bound: Bound,
    others: Iterable[str] = (),
    made_by: str | None = None,
) -> ToolMessage | Run:
    """Check ``call`` against the caller's tools now (``listed``: the operator's overrides and
    the tools, from ``tools_now``); answer it when it is wrong, else say how to run it.
    ``others``: the agent's own tools, named beside the registry's to a model that called a tool
    that does not exist. ``made_by``: the id of the AI message that made the call, when the
    caller looked it up already (``message_id``)."""
    overrides, tools = listed
    settings, turn = bound.both_settings(overrides)
    call_id, name = call.get("id") or "", str(call.get("name"))
    _, by_name = for_model(tools)
    names = {model: tool.name for model, tool in by_name.items()}
    others = sorted(set(others) - set(names))
    if name not in names and others:
        available = ", ".join(sorted([*names, *others]))
        unknown = error_answer(
            "not_found", UNKNOWN_TOOL.format(name=name[:100], available=available)
        )
        return tool_message(call_id, unknown, name=name)
    problem = call_problem(name, call.get("args"), names, bound.executor.registry)
    if problem is not None:
        return tool_message(call_id, problem, name=name)
    tool = by_name[name]
    pending = PendingCall(
        id=call_id,
        message_id=message_id(state, call_id) if made_by is None else made_by,
        tool=tool.name,
        args={},
    )
    key = None if tool.never_held else idempotency_key(thread, pending)
    return Run(
        caller=caller[0],
        allow=caller[1],
        tool=tool.name,
        input=arguments(call.get("args")) or {},
        control={} if key is None else {"idempotency_key": key},
        settings=settings,
        limit=turn.agent_tool_result_chars,
        call_id=call_id,
        model_name=name,
        thread=thread,
        request=request_of(state.get("messages") or []) if isinstance(state, dict) else None,
    )


def finish(run: Run, answer: Answer) -> ToolMessage:
    """The tool message of an executed call: the fitted answer, or a held write's notice."""
    message = tool_message(run.call_id, answered(answer, run.limit), name=run.model_name)
    if isinstance(answer, Held):
        held = {"confirmation_id": answer.confirmation_id, "tool": run.tool}
        message.artifact = {HELD_KEY: held}
    return message


def message_id(state: Any, call_id: str) -> str:
    """The id of the latest AI message that made the call ``call_id`` (part of its key)."""
    messages = state.get("messages", []) if isinstance(state, dict) else []
    for message in reversed(messages):
        if isinstance(message, AIMessage) and any(
            c.get("id") == call_id for c in message.tool_calls
        ):
            return message.id or ""
    return ""
