"""``Agent``: a stateful session of turns (``one_turn.py`` is the one-call ``chat``, ``pool.py``
named agents; docs/architecture.md §7).

An Agent owns a conversation thread: its history lives in the checkpointer under ``thread_id``, so
an Agent re-created with the same storage and thread id — in another process, days later —
continues it. Every turn runs the governed turn graph: tools listed per caller, arguments checked,
results fitted, and writes that need a person wait until ``confirm``.

Examples:
    >>> from turnkit import Agent, tool
    >>> @tool(read_only=True)
    ... def get_weather(city: str) -> str:
    ...     "Get current weather conditions for a city."
    ...     return f"{city}: 22°C, sunny"
    >>> agent = Agent("openai:gpt-4o-mini", tools=[get_weather])  # doctest: +SKIP
    >>> agent.prompt("What's the weather in Lisbon?").content  # doctest: +SKIP
    'The weather in Lisbon is 22°C and sunny.'
"""

from __future__ import annotations

import asyncio
import functools
import os
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, convert_to_messages
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.message import add_messages
from langgraph.types import Command, StreamMode

from turnkit.agent._portal import Portal, shared_portal
from turnkit.agent.local_tools import LocalModule
from turnkit.agent.models import model_error, resolve_model, with_own_client
from turnkit.agent.response import Response
from turnkit.agent.streaming import (
    AsyncTurnStream,
    Streaming,
    TurnStream,
    stream_modes,
    streamed,
)
from turnkit.agent.structured import instruction, parse
from turnkit.errors import AgentBusy, AgentTimeout, ResumeError, ThreadBusy
from turnkit.executor.executor import Executor, no_permissions
from turnkit.graph.build import build_turn_graph
from turnkit.registry import ids
from turnkit.registry.caller import Caller, PermissionProvider
from turnkit.registry.registry import Registry
from turnkit.registry.settings import Settings
from turnkit.storage import AsyncStorage, open_async_storage
from turnkit.turn.context import TurnContext
from turnkit.turn.decisions import HOW_TO_RESUME, unstorable
from turnkit.turn.recovery import recovered, unanswered

__all__ = ["AGENT_CALLER", "Agent"]

_UNSEEN = object()

AGENT_CALLER = Caller.key("turnkit-agent")
"""The default caller: a key without scopes, so it sees public tools — an Agent's own tools."""


class Agent:
    """A conversation with a model and governed tools; ``prompt`` runs one turn."""

    def __init__(
        self,
        model: Any,
        *,
        system: str | None = None,
        tools: Iterable[object] = (),
        registry: Registry | None = None,
        executor: Executor | None = None,
        caller: Caller | None = None,
        permissions: PermissionProvider | None = None,
        storage: str | os.PathLike[str] | AsyncStorage | None = None,
        thread_id: str | None = None,
        manage_history: bool = True,
        schema: Any = None,
        settings: Settings | None = None,
        base_url: str | None = None,
    ) -> None:
        """Bind the model, tools, storage and caller.

        Args:
            model: a LangChain chat model, or a string such as ``"openai:gpt-4o-mini"``.
            system: the system prompt, put first in a new thread.
            tools: functions (``@tool`` or plain), tool objects (``name``, ``description``,
                ``parameters_schema``, ``execute``), LangChain tools:
                the ``local`` module, no rights configuration needed.
            registry: modules with governed tools (combined with ``tools``).
            executor: an executor to run the tools (then give tools through its registry).
            caller: whose rights apply; default ``AGENT_CALLER`` (sees public tools only).
            permissions: the application's permission provider for the registry's tools.
            storage: a SQLite path, ``sqlite:///...`` or ``postgresql://...`` URL (opened here,
                a short blocking call: from async code, create the Agent with
                ``await asyncio.to_thread(Agent, ...)``), or an ``AsyncStorage``; default: in
                memory (nothing survives the process).
            thread_id: the conversation to continue; default a new one.
            manage_history: False keeps nothing; ``prompt(messages=...)`` gives the history.
            schema: structured output (pydantic model, JSON Schema, or ``{"field": "type"}``).
            settings: the turn's settings (``max_rounds``, ``agent_tool_result_chars``, ...).
            base_url: an OpenAI-compatible server for a string model (vLLM, llama.cpp, Ollama).

        Raises:
            ModelError: the model cannot be built (see ``resolve_model``).
            StorageError: ``storage`` cannot be opened.
        """
        if executor is not None and (tools or registry is not None or permissions is not None):
            raise ValueError(
                "give tools, modules and permissions through the executor, or no executor"
            )
        self._closed = False
        self._storage: AsyncStorage | None = None
        self._lock = threading.Lock()
        try:
            self.model = with_own_client(resolve_model(model, base_url=base_url))
            checkpointer = self._open(storage)
            ledger = self._storage.ledger if self._storage is not None else None
            modules = [LocalModule(tools), *(registry.modules.values() if registry else ())]
            self.executor = executor or Executor(
                Registry(modules),
                ledger=ledger,
                settings=settings,
                permissions=permissions or no_permissions,
            )
        except BaseException:
            self.close()
            raise
        self._owns_executor = executor is None
        self.caller = caller or AGENT_CALLER
        self.system = system
        self.schema = schema
        self.manage_history = manage_history
        self.thread_id = thread_id or str(uuid.uuid4())
        self._pending_thread: str | None = None
        self.graph = build_turn_graph(
            self.executor, self.model, settings=settings, checkpointer=checkpointer
        )

    @property
    def _portal(self) -> Portal:
        """The process's portal, looked up on every call: a forked child has a new one."""
        return shared_portal()

    def _open(self, storage: Any) -> Any:
        if storage is None:
            return InMemorySaver()
        if isinstance(storage, AsyncStorage):
            self._storage = storage
        elif isinstance(storage, str | os.PathLike):
            self._storage = self._portal.run(_opened(storage))
        else:
            raise TypeError(
                "storage must be a SQLite path, a sqlite:/// or postgresql:// URL, or an"
                f" AsyncStorage (from open_async_storage), got {type(storage).__name__}"
            )
        return self._storage.checkpointer

    # --- turns ------------------------------------------------------------------------------

    def prompt(
        self, text: str, *, timeout: float = 60, messages: Sequence[Any] | None = None
    ) -> Response:
        """Send ``text`` and run the turn to its answer (or to writes waiting for a decision).

        Interrupted (Ctrl-C), the turn is cancelled before the interruption goes on.

        Raises:
            AgentBusy: another prompt of this agent is in flight — here, or in another process
                on the same storage and thread (the thread's lease) — or this is called from
                async code on turnkit's loop (an async tool handler): use ``aprompt`` there.
            AgentTimeout: the turn took longer than ``timeout`` seconds; it was cancelled.
            ModelError: the model's server cannot be reached; the conversation is kept.
            StructuredOutputError: a ``schema`` was given and the answer does not match it.
        """
        run = functools.partial(self._prompt, text, messages)
        with self._busy():
            return self._portal.run(self._timed(run, timeout))

    async def aprompt(
        self, text: str, *, timeout: float = 60, messages: Sequence[Any] | None = None
    ) -> Response:
        """Async twin of ``prompt``."""
        run = functools.partial(self._prompt, text, messages)
        with self._busy():
            return await self._portal.arun(self._timed(run, timeout))

    def stream(
        self,
        text: str,
        *,
        stream_mode: StreamMode | Sequence[StreamMode] = "updates",
        timeout: float = 60,
        messages: Sequence[Any] | None = None,
    ) -> TurnStream:
        """``prompt``, streamed: iterate for LangGraph's chunks as they come, then read
        ``.response`` (the ``Response`` that ``prompt`` returns, held writes in ``pending``).

        ``stream_mode`` is LangGraph's: ``"updates"`` gives ``{node: update}`` after each step
        (and ``{"__interrupt__": ...}`` when writes wait for a decision), ``"messages"`` gives
        ``(message chunk, metadata)`` as the model produces tokens; a list gives ``(mode,
        chunk)`` pairs. The turn runs while it is iterated; leaving the loop early cancels it.

        Raises:
            ValueError: ``stream_mode`` names no LangGraph stream mode.
            AgentBusy, AgentTimeout, ModelError: as ``prompt``, raised by the iteration.

        Examples:
            >>> stream = agent.stream("Make our first product cheaper")  # doctest: +SKIP
            >>> [next(iter(update)) for update in stream]  # doctest: +SKIP
            ['list_tools', 'call_model', 'validate_args', 'execute', 'fit_results', '__interrupt__']
            >>> agent.confirm({stream.response.pending[0].id: "approve"}).content  # doctest: +SKIP
            'Done.'
        """
        run = functools.partial(self._prompt, text, messages)
        return TurnStream(run, agent=self, stream_mode=stream_modes(stream_mode), timeout=timeout)

    def astream(
        self,
        text: str,
        *,
        stream_mode: StreamMode | Sequence[StreamMode] = "updates",
        timeout: float = 60,
        messages: Sequence[Any] | None = None,
    ) -> AsyncTurnStream:
        """Async twin of ``stream``: ``async for chunk in agent.astream(...)``, then
        ``.response``."""
        run = functools.partial(self._prompt, text, messages)
        modes = stream_modes(stream_mode)
        return AsyncTurnStream(run, agent=self, stream_mode=modes, timeout=timeout)

    def confirm(self, decisions: dict[str, Any], *, timeout: float = 60) -> Response:
        """Resume the held writes: ``{confirmation_id: "approve" | "reject" | {...}}``.

        A decision is ``"approve"``, ``"reject"``, ``{"action": "reject", "message": ...}`` or
        ``{"action": "edit", "arguments": {...}}``; an id left out stays held.
        """
        run = functools.partial(self._resume, decisions)
        with self._busy():
            return self._portal.run(self._timed(run, timeout))

    async def aconfirm(self, decisions: dict[str, Any], *, timeout: float = 60) -> Response:
        """Async twin of ``confirm``."""
        run = functools.partial(self._resume, decisions)
        with self._busy():
            return await self._portal.arun(self._timed(run, timeout))

    def get_messages(self) -> list[BaseMessage]:
        """The conversation so far (empty when ``manage_history`` is False)."""
        if not self.manage_history:
            return []
        state = self._portal.run(self.graph.aget_state(self._config(self.thread_id)))
        messages = list(state.values.get("messages", [])) if state.values else []
        fixes, _ = recovered(messages, unanswered(messages), lambda call_id: None)  # for the reader
        return list(add_messages(messages, fixes))  # type: ignore[arg-type]

    def reset(self) -> None:
        """Start a new conversation; the configuration stays.

        Raises:
            AgentBusy: a prompt is in flight.
        """
        with self._busy():
            self.thread_id = str(uuid.uuid4())
            self._pending_thread = None

    def close(self) -> None:
        """Release the executor (if the agent made it), then the storage; safe to call again.

        The executor first: the outcome of a call cancelled while its handler ran is recorded
        by a thread of the executor's, which must be done with the ledger (or told to leave it)
        before the storage closes the ledger.
        """
        if self._closed:
            return
        if self._storage is not None:
            self._portal.run(self._shut(self._storage))  # refused on turnkit's loop: no change
        else:
            self._close_executor()
        self._release()

    async def aclose(self) -> None:
        """Async twin of ``close``: releases them without blocking the event loop."""
        if self._closed:
            return
        if self._storage is not None:
            await self._portal.arun(self._shut(self._storage))
        else:
            await asyncio.to_thread(self._close_executor)
        self._release()

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> Agent:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _shut(self, storage: AsyncStorage) -> None:
        """On the portal: close the agent's own executor (it may wait for a recording to end,
        so in a worker thread), then ``storage``."""
        await asyncio.to_thread(self._close_executor)
        await storage.aclose()

    def _close_executor(self) -> None:
        """Close the executor if the agent made it (one given to the agent is its owner's)."""
        if getattr(self, "_owns_executor", False):
            self.executor.close()

    def _release(self) -> None:
        """Mark the agent closed and forget its (closed) storage."""
        self._closed = True
        self._storage = None

    # --- inside the private loop ------------------------------------------------------------

    @contextmanager
    def _busy(self) -> Iterator[None]:
        if self._closed:
            raise RuntimeError("this agent is closed: create a new one")
        if not self._lock.acquire(blocking=False):
            raise AgentBusy("this agent is answering a prompt; wait for it before the next call")
        try:
            yield
        except ThreadBusy as exc:
            if type(exc) is not ThreadBusy:  # AgentBusy already, or LeaseLost: as it is
                raise
            raise AgentBusy(
                f"this agent's conversation (thread {exc.thread_id!r}) is answering a prompt in"
                " another process; wait for it before the next call",
                thread_id=exc.thread_id,
                holder=exc.holder,
            ) from exc
        finally:
            self._lock.release()

    async def _timed(self, run: Callable[[], Awaitable[Response]], timeout: float) -> Response:
        """``run()`` within ``timeout`` seconds (made here: a run refused before it starts leaves
        no coroutine behind that was never awaited)."""
        try:
            return await asyncio.wait_for(run(), timeout)
        except TimeoutError:
            raise AgentTimeout(
                f"the turn took longer than {timeout:g} s and was cancelled; the agent is ready"
                " for the next prompt"
            ) from None

    async def _prompt(
        self, text: str, messages: Sequence[Any] | None, streaming: Streaming | None = None
    ) -> Response:
        """Run a turn for ``text``, streamed when ``streaming`` says how."""
        if self.manage_history:
            if messages is not None:
                raise ValueError("messages= is for manage_history=False; this agent keeps history")
            thread = self.thread_id
            state = await self.graph.aget_state(self._config(thread))
            before = list(state.values.get("messages") or [])
            new = [] if before else self._preamble()
        else:
            thread = self._pending_thread = f"stateless-{uuid.uuid4()}"
            new, before = self._preamble() + convert_to_messages(list(messages or [])), []
        human = HumanMessage(text, id=ids.uuid4_text())
        try:
            return await self._run({"messages": [*new, human]}, thread, before, streaming)
        except BaseException:
            if not self.manage_history:  # a failed stateless turn leaves nothing behind
                await asyncio.shield(self._forget(thread))
            raise

    async def _resume(self, decisions: dict[str, Any]) -> Response:
        thread = self.thread_id if self.manage_history else self._pending_thread
        if thread is None:
            raise ValueError("no writes are waiting for a decision")
        problems = unstorable(decisions)
        if problems:
            raise ResumeError(list(decisions) if isinstance(decisions, dict) else [], problems,
                              HOW_TO_RESUME)  # fmt: skip
        return await self._run(Command(resume=decisions), thread)

    async def _run(
        self,
        request: Any,
        thread: str,
        before: list[Any] | None = None,
        streaming: Streaming | None = None,
    ) -> Response:
        """Run ``request`` on ``thread``; ``before``: its messages, when the caller has read them
        (each read of a thread replays its messages since the last snapshot); ``streaming``: how
        the run is streamed, when it is."""
        config = self._config(thread)
        if before is None:
            before = list((await self.graph.aget_state(config)).values.get("messages") or [])
        seen = {m.id: m.content for m in before}
        context = TurnContext(caller=self.caller)
        try:
            if streaming is None:
                result: Any = await self.graph.ainvoke(request, config, context=context)
            else:
                result = await streamed(self.graph, request, config, context, streaming)
        except Exception as exc:  # translated, never swallowed; the checkpoints stay as they are
            error = model_error(exc, self.model)
            if error is None:
                raise
            raise error from exc
        messages = result.get("messages", [])
        start = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=-1)
        new = [m for m in messages[start + 1 :] if seen.get(m.id, _UNSEEN) != m.content]
        response = Response.of_turn(new, result.get("__interrupt__"), final=messages[-1])
        if not self.manage_history and not response.pending:
            await self._forget(thread)
        if self.schema is not None and not response.pending:
            response = _with_parsed(response, parse(response.content, self.schema))
        return response

    async def _forget(self, thread: str) -> None:
        await self.graph.checkpointer.adelete_thread(thread)  # type: ignore[union-attr]
        self._pending_thread = None

    def _preamble(self) -> list[BaseMessage]:
        parts = [self.system] if self.system else []
        if self.schema is not None:
            parts.append(instruction(self.schema))
        return [SystemMessage("\n\n".join(parts))] if parts else []

    @staticmethod
    def _config(thread: str) -> RunnableConfig:
        return {"configurable": {"thread_id": thread}}


async def _opened(url: Any) -> AsyncStorage:
    return await open_async_storage(url)


def _with_parsed(response: Response, parsed: Any) -> Response:
    from dataclasses import replace

    return replace(response, parsed=parsed)
