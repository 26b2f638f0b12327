"""What the nodes share: the live objects bound when the graph is built, and the caller lookup."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langgraph.runtime import Runtime

from turnkit.errors import TurnkitError
from turnkit.registry.caller import Caller
from turnkit.registry.executor import Executor
from turnkit.registry.settings import Settings
from turnkit.registry.visibility import Allow

__all__ = ["Bound", "MissingCallerError"]


class MissingCallerError(TurnkitError, ValueError):
    """A turn was started without a caller and the graph has no default caller."""


@dataclass(frozen=True, slots=True)
class Bound:
    """The executor and model of a graph, and the caller used when a run passes no context."""

    executor: Executor
    model: BaseChatModel | Any
    default_caller: Caller | None = None
    settings: Settings | None = None

    def settings_now(self) -> Settings:
        """The graph's settings (or the executor's) with the ledger's overrides, read now."""
        return self.both_settings(self.executor.ledger.settings())[1]

    def both_settings(self, overrides: dict[str, Any]) -> tuple[Settings, Settings]:
        """``(the executor's, the graph's)`` settings with the operator's ``overrides``: what
        decides visibility, and the turn's limits (the same unless the graph was given its own)."""
        executors = self.executor.defaults.merged(overrides)
        return executors, executors if self.settings is None else self.settings.merged(overrides)

    def limits(self, state: Any) -> tuple[int, int]:
        """``(max_rounds, result_chars)`` of the turn: from its state, else read now."""
        limits = state.get("limits")
        if limits:
            return limits["max_rounds"], limits["result_chars"]
        settings = self.settings_now()
        return settings.max_rounds, settings.agent_tool_result_chars

    async def alimits(self, state: Any) -> tuple[int, int]:
        """Async twin of ``limits``."""
        limits = state.get("limits")
        if limits:
            return limits["max_rounds"], limits["result_chars"]
        settings = await self.asettings_now()
        return settings.max_rounds, settings.agent_tool_result_chars

    async def asettings_now(self) -> Settings:
        """Async twin of ``settings_now``."""
        return self.both_settings(await self.executor.ledger.asettings())[1]

    def caller(self, runtime: Runtime[Any]) -> tuple[Caller, Allow]:
        """The caller and allow list of this run: from the runtime context, else the default."""
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
        if caller is None:
            caller = self.default_caller
        if not isinstance(caller, Caller):
            raise MissingCallerError(
                "this turn has no caller: pass context=TurnContext(caller=Caller.session(...))"
                " to invoke/stream and again on every resume, or build the graph with"
                " default_caller=..."
            )
        return caller, allow or "all"
