"""``TurnkitMiddleware``: turnkit's governance for an existing ``langchain.agents.create_agent``.

Each hook is thin; the work is where its name says (``tool_calls.py``, ``holds.py``, and the
turn graph's own nodes):

- ``wrap_model_call``: held writes decided since are settled and this round's are asked in one
  interrupt in the turn graph's payload (with LangChain's ``HITLRequest``), resumed with
  ``Command(resume=...)`` and run exactly once (``holds.py``); then the model is shown the
  caller's visible registry tools **now** (beside the agent's own tools), and its reply is
  checked before it is stored (``checked_reply``: strict argument text, cut-off replies, values
  beyond the JSON limits, repeated call ids);
- ``after_model``: calls that cannot run (unparseable arguments, a refused call) are answered, so
  the model can correct itself instead of the run ending silently;
- ``wrap_tool_call``: a call of a registry tool is validated and run through the executor (rights
  now, ledger, idempotency) and fitted; the agent's own tools run as before.

The holds are settled in the model's step, not in a ``before_model`` hook of their own: a hook is
a graph step, checkpointed, before every model call of every turn, held writes or none (on a turn
of one read, 7 steps instead of 5, HITL's count). The settled messages reach the state through
the model step's update (``ExtendedModelResponse``), in place (same message ids).

The caller travels in the runtime context (``context=TurnContext(caller=...)``, or any context
with a ``caller``), passed again on every resume; without one the middleware's ``default_caller``
acts, and without that a run fails with ``MissingCallerError``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware.types import (
    AgentMiddleware,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    hook_config,
)
from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import Runtime
from langgraph.types import Command

from turnkit._compat import checkpoint_problem
from turnkit.executor.executor import Executor
from turnkit.middleware import holds
from turnkit.middleware.round_settings import RoundSettings
from turnkit.middleware.tool_calls import Run, finish, message_id, placeholders, prepare
from turnkit.registry.caller import Caller
from turnkit.registry.settings import Settings
from turnkit.turn.bound import Bound
from turnkit.turn.checks import unparsed
from turnkit.turn.messages import call_names, error_answer, last_ai, tool_message
from turnkit.turn.model_reply import checked_reply
from turnkit.turn.tools import for_model

__all__ = ["TurnkitMiddleware"]

ToolResult = ToolMessage | Command[Any]


class TurnkitMiddleware(AgentMiddleware):
    """Governs a ``create_agent`` agent's tool calls with turnkit's executor.

    Examples:
        >>> from langchain.agents import create_agent  # doctest: +SKIP
        >>> agent = create_agent(model, middleware=[TurnkitMiddleware(executor)],
        ...                      checkpointer=InMemorySaver())  # doctest: +SKIP
        >>> agent.invoke({"messages": [...]}, config,
        ...              context=TurnContext(caller=Caller.session("u_1")))  # doctest: +SKIP
    """

    def __init__(
        self,
        executor: Executor,
        *,
        default_caller: Caller | None = None,
        settings: Settings | None = None,
    ) -> None:
        """Govern with ``executor``; ``default_caller`` acts for runs without a caller in their
        context (none by default: such a run fails); ``settings`` overrides the executor's turn
        limits (``agent_tool_result_chars``) as ``build_turn_graph``'s do."""
        super().__init__()
        self.bound = Bound(executor, None, default_caller, settings)
        self.tools = placeholders(executor.registry.tools)
        self._ours = frozenset(tool.name for tool in self.tools)
        self._round = RoundSettings()

    # -- held writes settled, then the model sees the caller's tools now; its reply is checked --

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], Any]) -> Any:
        """Settle and ask about held writes; show the model only the tools the caller may use
        now; check its reply."""
        settled = holds.settle(request.messages, request.runtime, self.bound)
        caller, allow = self.bound.caller(request.runtime)
        kept = None if settled else self._round.answered(request.messages)
        overrides, tools = self.bound.executor.tools_now(caller, allow, kept)
        shown = self._shown(request, tools, settled)
        return self._answer(shown, handler(shown), settled, overrides)

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[Any]]
    ) -> Any:
        """Async twin of ``wrap_model_call``."""
        settled = await holds.asettle(request.messages, request.runtime, self.bound)
        caller, allow = self.bound.caller(request.runtime)
        kept = None if settled else self._round.answered(request.messages)
        overrides, tools = await self.bound.executor.atools_now(caller, allow, kept)
        shown = self._shown(request, tools, settled)
        return self._answer(shown, await handler(shown), settled, overrides)

    def _shown(self, request: ModelRequest, tools: Any, settled: list[ToolMessage]) -> ModelRequest:
        """The request with the caller's visible tools, and the settled holds' outcomes in place
        of their notices."""
        _, visible = for_model(tools)
        shown = [t for t in request.tools if _name(t) not in self._ours or _name(t) in visible]
        if not settled:
            return request.override(tools=shown)
        return request.override(tools=shown, messages=_in_place(request.messages, settled))

    def _answer(
        self,
        request: ModelRequest,
        response: Any,
        settled: list[ToolMessage],
        overrides: dict[str, Any],
    ) -> Any:
        """The checked reply, with the settled holds' messages as the step's state update; the
        overrides read for it are kept for its round (``round_settings.py``)."""
        checked = self._checked(request, response)
        replies = checked.result if isinstance(checked, ModelResponse) else [checked]
        self._round.keep(replies, overrides)
        if not settled:
            return checked
        if isinstance(checked, AIMessage):
            checked = ModelResponse(result=[checked])
        return ExtendedModelResponse(
            model_response=checked, command=Command(update={"messages": settled})
        )

    def _checked(self, request: ModelRequest, response: Any) -> Any:
        if isinstance(response, AIMessage):
            return checked_reply(response, request.messages, checkpoint_problem=checkpoint_problem)
        if isinstance(response, ModelResponse):
            response.result = [
                checked_reply(m, request.messages, checkpoint_problem=checkpoint_problem)
                if isinstance(m, AIMessage)
                else m
                for m in response.result
            ]
        return response

    # -- calls that cannot run are answered ---------------------------------------------------

    @hook_config(can_jump_to=["model"])
    def after_model(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Answer the calls that cannot run; back to the model when no call can."""
        ai = last_ai(state["messages"])
        if ai is None or not ai.invalid_tool_calls:
            return None
        names = call_names(ai)
        answers = [
            tool_message(
                bad.get("id") or "",
                error_answer("invalid_input", unparsed(bad)),
                name=names.get(bad.get("id") or ""),
            )
            for bad in ai.invalid_tool_calls
        ]
        update: dict[str, Any] = {"messages": answers}
        if not ai.tool_calls:
            update["jump_to"] = "model"
        return update

    async def aafter_model(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Async twin of ``after_model`` (pure: nothing to wait for)."""
        return self.after_model(state, runtime)

    # -- registry tools run through the executor ----------------------------------------------

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolResult]
    ) -> ToolResult:
        """Run a registry tool's call through the executor; pass the agent's own tools on."""
        if self._theirs(request):
            return handler(request)
        caller = self.bound.caller(request.runtime)
        made_by = message_id(request.state, request.tool_call.get("id") or "")
        listed = self.bound.executor.tools_now(*caller, self._round.of(made_by))
        ready = self._prepare(request, caller, listed, made_by)
        if isinstance(ready, ToolMessage):
            return ready
        answer = self.bound.executor.call(
            ready.caller, ready.tool, ready.input, ready.control,
            allow=ready.allow, settings=ready.settings, thread=ready.thread,
            request=ready.request,
        )  # fmt: skip
        return finish(ready, answer)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolResult]],
    ) -> ToolResult:
        """Async twin of ``wrap_tool_call``."""
        if self._theirs(request):
            return await handler(request)
        caller = self.bound.caller(request.runtime)
        made_by = message_id(request.state, request.tool_call.get("id") or "")
        listed = await self.bound.executor.atools_now(*caller, self._round.of(made_by))
        ready = self._prepare(request, caller, listed, made_by)
        if isinstance(ready, ToolMessage):
            return ready
        answer = await self.bound.executor.acall(
            ready.caller, ready.tool, ready.input, ready.control,
            allow=ready.allow, settings=ready.settings, thread=ready.thread,
            request=ready.request,
        )  # fmt: skip
        return finish(ready, answer)

    def _theirs(self, request: ToolCallRequest) -> bool:
        """True for a call of one of the agent's own tools (not a registry tool)."""
        return request.tool is not None and request.tool_call["name"] not in self._ours

    def _prepare(
        self, request: ToolCallRequest, caller: Any, listed: Any, made_by: str
    ) -> ToolMessage | Run:
        runtime = request.runtime
        thread = getattr(runtime.execution_info, "thread_id", None)
        others = [tool.name for tool in runtime.tools if tool.name not in self._ours]
        return prepare(
            request.tool_call, request.state, thread, caller, listed, self.bound, others, made_by
        )


def _name(tool: Any) -> str | None:
    return tool.get("name") if isinstance(tool, dict) else getattr(tool, "name", None)


def _in_place(messages: list[AnyMessage], settled: list[ToolMessage]) -> list[AnyMessage]:
    """``messages`` with each of ``settled`` where the message of its id was."""
    by_id = {message.id: message for message in settled}
    return [by_id.get(message.id, message) if message.id else message for message in messages]
