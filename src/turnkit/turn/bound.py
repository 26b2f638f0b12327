"""What the nodes share: the live objects bound when the graph is built, and the caller lookup."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from langchain_core.language_models import BaseChatModel

from turnkit.errors import MissingCallerError
from turnkit.executor.executor import Executor
from turnkit.registry._memo import remember
from turnkit.registry.caller import Caller
from turnkit.registry.settings import Settings
from turnkit.registry.visibility import Allow
from turnkit.turn.model_reply import may_stream
from turnkit.turn.server_user import caller_of_user, is_studio, server_user, uses_custom_auth

__all__ = ["Bound"]


class WithContext(Protocol):
    """What carries a run's context: LangGraph's ``Runtime``, or a tool's ``ToolRuntime``."""

    @property
    def context(self) -> Any:
        """The run's context."""


@dataclass(frozen=True, slots=True)
class Bound:
    """The executor and model of a graph, and the caller used when a run passes no context."""

    executor: Executor
    model: BaseChatModel | Any
    default_caller: Caller | None = None
    settings: Settings | None = None
    _merged: dict[str, tuple[Settings, Settings]] = field(default_factory=dict)
    _models: dict[tuple[str, ...], tuple[Any, bool]] = field(default_factory=dict)

    def both_settings(self, overrides: dict[str, Any]) -> tuple[Settings, Settings]:
        """``(the executor's, the graph's)`` settings with the operator's ``overrides``: what
        decides visibility and runs the calls, and the turn's limits (the same unless the graph
        was given its own). Merged once per distinct ``overrides``."""
        key = json.dumps(overrides, sort_keys=True) if overrides else ""
        found = self._merged.get(key)
        if found is None:
            executors = self.executor.defaults.merged(overrides)
            graphs = executors if self.settings is None else self.settings.merged(overrides)
            # overrides change rarely: a small cache is plenty
            found = remember(self._merged, key, (executors, graphs), limit=64)
        return found

    def turn_settings(self, state: Any) -> tuple[Settings, Settings]:
        """``both_settings`` of the overrides the run read at its start (``list_tools``, or
        ``await_confirmation`` on a resume), kept in the state; read now when there are none."""
        overrides = state.get("overrides")
        if overrides is None:
            overrides = self.executor.ledger.settings()
        return self.both_settings(overrides)

    async def aturn_settings(self, state: Any) -> tuple[Settings, Settings]:
        """Async twin of ``turn_settings``."""
        overrides = state.get("overrides")
        if overrides is None:
            overrides = await self.executor.ledger.asettings()
        return self.both_settings(overrides)

    def model_for(self, tools: list[dict[str, Any]]) -> tuple[Any, bool]:
        """``(the model with tools bound, whether its calls may stream)`` for a turn's tool
        definitions; bound once per list of tool names (a registry's definitions of given names
        never change), not on every model call."""
        key = tuple(tool["function"]["name"] for tool in tools)
        found = self._models.get(key)
        if found is None:
            model = self.model.bind_tools(tools) if tools else self.model
            found = remember(self._models, key, (model, may_stream(model)), limit=256)
        return found

    def caller(self, runtime: WithContext) -> tuple[Caller, Allow]:
        """The caller and allow list of this run (``runtime`` may also be a tool's
        ``ToolRuntime``). In process: a ``Caller`` in the runtime context, else the default
        caller. On LangGraph's server: the user its auth signed in (``turn/server_user.py``; its
        allow list, never the context's), else the default caller; a caller in the context
        (which the client wrote) is refused, and so is Studio's own user when the server has
        custom auth."""
        context = runtime.context
        caller = getattr(context, "caller", None)
        if caller is None and isinstance(context, dict):
            caller = context.get("caller")
        allow = getattr(context, "allow", None) or (
            context.get("allow") if isinstance(context, dict) else None
        )
        if caller is not None and not isinstance(caller, Caller):
            raise MissingCallerError(
                f"the run's context gives the caller as {type(caller).__name__}, not a Caller: a"
                " caller sent as data (say, by an HTTP client) is not accepted, since it would"
                " choose whose rights apply; the application sets the caller"
            )
        user = server_user(runtime)
        if user is not None:  # on LangGraph's server, where the client writes the context
            if caller is not None:
                raise MissingCallerError(
                    "on LangGraph's server the caller is the user its auth signed in: a caller"
                    " in the run's context is not accepted there (the client writes the context,"
                    " so it would choose whose rights apply)"
                )
            signed_in = caller_of_user(user)
            if signed_in is not None:
                return signed_in
            if is_studio(user) and uses_custom_auth():
                raise MissingCallerError(
                    "Studio's own user acts for no one on a server with custom auth (any"
                    " request can claim it): sign Studio's requests in with your auth"
                    ' (langgraph.json "auth": {"disable_studio_auth": true})'
                )
        if caller is None:
            caller = self.default_caller
        if not isinstance(caller, Caller):
            raise MissingCallerError(
                "this turn has no caller: pass context=TurnContext(caller=Caller.session(...))"
                " to invoke/stream and again on every resume, or build the graph (or"
                " TurnkitMiddleware) with default_caller=...; on LangGraph's server, sign the"
                ' request in (langgraph.json "auth", see turnkit.deploy) or set'
                " TURNKIT_DEFAULT_USER"
            )
        return caller, allow or "all"
