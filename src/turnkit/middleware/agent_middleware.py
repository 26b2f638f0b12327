"""``TurnkitMiddleware``: turnkit's governance for an existing ``langchain.agents.create_agent``.

Each hook is thin; the work is where its name says (``tool_calls.py``, ``holds.py``, and the
turn graph's own nodes):

- ``wrap_model_call``: held writes decided since are settled and this round's are asked in one
  interrupt in the turn graph's payload (with LangChain's ``HITLRequest``), resumed with
  ``Command(resume=...)`` and run exactly once (``holds.py``); then the model is shown the
  caller's visible registry tools **now** (beside the agent's own tools), and its reply is
  checked before it is stored (``checked_reply``: strict argument text, cut-off replies, values
  beyond the JSON limits, repeated call ids), and its calls that cannot run (unparseable
  arguments, a refused call) are answered in the same step, so the model can correct itself
  instead of the run ending silently;
- ``wrap_tool_call``: a call of a registry tool is validated and run through the executor (rights
  now, ledger, idempotency) and fitted; the agent's own tools run as before.

The holds are settled, and the calls that cannot run answered, in the model's step, not in a
``before_model`` or ``after_model`` hook of their own: a hook is a graph step, checkpointed,
around every model call of every turn, whatever it finds (a turn of one read is 3 steps, where
HITL's takes 5). Both reach the state through the model step's update
(``ExtendedModelResponse``): the settled messages in place (same message ids), the answers after
the reply. A reply none of whose calls can run is answered and the model asked again within the
step, shown that reply and the answers (the model is asked at most the turn's ``max_rounds``
times in the step), where a hook would jump back to the model: a jump the graph does not take
when another middleware's ``after_model`` runs after the step. Only the last reply reaches the
state (with its answers, when none of its calls can run either): a middleware around this one
sees one reply, as from any model call, and the attempts before it are kept as a retry
middleware keeps them — not at all (``ModelCallLimitMiddleware``, counting in its
``after_model``, counts such a step once).

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
)
from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
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
from turnkit.turn.messages import call_names, error_answer, tool_message
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
        limits (``agent_tool_result_chars``; ``max_rounds``: the model calls of one step while
        none of its replies' calls can run) as ``build_turn_graph``'s do."""
        super().__init__()
        self.bound = Bound(executor, None, default_caller, settings)
        self.tools = placeholders(executor.registry.tools)
        self._ours = frozenset(tool.name for tool in self.tools)
        self._round = RoundSettings()

    # -- held writes settled, then the model sees the caller's tools now; its reply is checked --

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], Any]) -> Any:
        """Settle and ask about held writes; show the model only the tools the caller may use
        now; check its reply, and ask again while none of its calls can run (the model is asked
        at most the turn's ``max_rounds`` times in the step)."""
        settled = holds.settle(request.messages, request.runtime, self.bound)
        caller, allow = self.bound.caller(request.runtime)
        kept = None if settled else self._round.answered(request.messages)
        overrides, tools = self.bound.executor.tools_now(caller, allow, kept)
        shown = self._shown(request, tools, settled)
        response = self._checked(shown, handler(shown))
        asking = _AskingAgain(shown, self._asks_left(overrides))
        while (again := asking.request(response)) is not None:
            response = self._checked(again, handler(again))
        return self._answer(response, settled, overrides)

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[Any]]
    ) -> Any:
        """Async twin of ``wrap_model_call``."""
        settled = await holds.asettle(request.messages, request.runtime, self.bound)
        caller, allow = self.bound.caller(request.runtime)
        kept = None if settled else self._round.answered(request.messages)
        overrides, tools = await self.bound.executor.atools_now(caller, allow, kept)
        shown = self._shown(request, tools, settled)
        response = self._checked(shown, await handler(shown))
        asking = _AskingAgain(shown, self._asks_left(overrides))
        while (again := asking.request(response)) is not None:
            response = self._checked(again, await handler(again))
        return self._answer(response, settled, overrides)

    def _shown(self, request: ModelRequest, tools: Any, settled: list[ToolMessage]) -> ModelRequest:
        """The request with the caller's visible tools, and the settled holds' outcomes in place
        of their notices."""
        _, visible = for_model(tools)
        shown = [t for t in request.tools if _name(t) not in self._ours or _name(t) in visible]
        if not settled:
            return request.override(tools=shown)
        return request.override(tools=shown, messages=_in_place(request.messages, settled))

    def _asks_left(self, overrides: dict[str, Any]) -> int:
        """How often the model may be asked again in one step (``max_rounds`` calls in all)."""
        return self.bound.both_settings(overrides)[1].max_rounds - 1

    def _answer(
        self, response: ModelResponse, settled: list[ToolMessage], overrides: dict[str, Any]
    ) -> ModelResponse | ExtendedModelResponse:
        """The checked reply, with the settled holds' messages and the answers to its calls that
        cannot run as the step's state update; the overrides read for it are kept for its round
        (``round_settings.py``)."""
        self._round.keep(response.result, overrides)
        messages = [*settled, *_unrunnable(response.result)]
        if not messages:
            return response
        return ExtendedModelResponse(
            model_response=response, command=Command(update={"messages": messages})
        )

    def _checked(self, request: ModelRequest, response: Any) -> ModelResponse:
        if isinstance(response, AIMessage):
            response = ModelResponse(result=[response])
        response.result = [
            checked_reply(m, request.messages, checkpoint_problem=checkpoint_problem)
            if isinstance(m, AIMessage)
            else m
            for m in response.result
        ]
        return response

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


def _unrunnable(replies: list[Any]) -> list[ToolMessage]:
    """The answers to the calls of the reply (the last AI message of ``replies``) that cannot
    run (unparseable arguments, or refused by ``checked_reply``), so the model can correct
    itself."""
    ai = next((m for m in reversed(replies) if isinstance(m, AIMessage)), None)
    if ai is None or not ai.invalid_tool_calls:
        return []
    names = call_names(ai)
    return [
        tool_message(
            bad.get("id") or "",
            error_answer("invalid_input", unparsed(bad)),
            name=names.get(bad.get("id") or ""),
        )
        for bad in ai.invalid_tool_calls
    ]


class _AskingAgain:
    """Within one model step: the request asking the model again while none of its reply's
    calls can run (where the run would end), shown those replies and their answers, ``left``
    times at most."""

    def __init__(self, shown: ModelRequest, left: int) -> None:
        self.shown = shown
        self.left = left
        self.tried: list[Any] = []  # the replies none of whose calls could run, answered

    def request(self, response: ModelResponse) -> ModelRequest | None:
        """The request to ask again after ``response``, or None: it stands."""
        ai = next((m for m in reversed(response.result) if isinstance(m, AIMessage)), None)
        if self.left <= 0 or ai is None or ai.tool_calls or not ai.invalid_tool_calls:
            return None
        self.left -= 1
        self.tried += [*response.result, *_unrunnable(response.result)]
        return self.shown.override(messages=[*self.shown.messages, *self.tried])


def _name(tool: Any) -> str | None:
    return tool.get("name") if isinstance(tool, dict) else getattr(tool, "name", None)


def _in_place(messages: list[AnyMessage], settled: list[ToolMessage]) -> list[AnyMessage]:
    """``messages`` with each of ``settled`` where the message of its id was."""
    by_id = {message.id: message for message in settled}
    return [by_id.get(message.id, message) if message.id else message for message in messages]
