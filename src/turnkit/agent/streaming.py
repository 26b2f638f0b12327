"""``Agent.stream`` / ``Agent.astream``: a turn's LangGraph stream chunks while it runs, then its
``Response``.

The turn runs on turnkit's event loop (``_portal.py``) like every Agent turn; its chunks cross to
the caller through a queue: a thread-safe one for ``stream`` (sync code), the caller's own loop's
for ``astream``. Whatever the caller asked for, the run also streams LangGraph's ``updates`` and
``values`` for itself: the last values and the interrupts make the ``Response`` (as ``ainvoke``
makes its result), so held writes are in ``response.pending`` exactly as after ``prompt``.

A caller that stops iterating (``break``, an exception, Ctrl-C, a cancelled task) cancels the
turn and waits for it to end (as ``prompt`` does), and the agent is free for the next prompt.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import queue
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Coroutine,
    Iterator,
    Sequence,
)
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol, get_args

from langchain_core.runnables import RunnableConfig
from langgraph.types import StreamMode

from turnkit.agent._portal import CANCEL_WAIT, Portal
from turnkit.agent.response import Response

__all__ = ["AsyncTurnStream", "Emit", "Streaming", "TurnStream", "stream_modes", "streamed"]

Emit = Callable[[Any], None]
"""Where a streamed run puts each chunk the caller asked for."""
Run = Callable[..., Coroutine[Any, Any, Response]]
"""A turn, given ``streaming=``: ``Agent._prompt`` with its text bound."""


class Runner(Protocol):
    """What a stream needs of its ``Agent``: kept busy while its turn runs, on the agent's portal,
    within a time limit."""

    @property
    def _portal(self) -> Portal: ...

    def _busy(self) -> AbstractContextManager[None]: ...

    def _timed(
        self, run: Callable[[], Coroutine[Any, Any, Response]], timeout: float
    ) -> Coroutine[Any, Any, Response]: ...


@dataclass(frozen=True, slots=True)
class Streaming:
    """How a turn is streamed: the modes the caller asked for, and where their chunks go."""

    stream_mode: StreamMode | list[StreamMode]
    emit: Emit


MODES: tuple[str, ...] = get_args(StreamMode)
"""LangGraph's stream modes."""
_OWN = ("updates", "values")
"""What a streamed turn always streams for itself (interrupts, the last values)."""
_DONE = object()


def stream_modes(stream_mode: StreamMode | Sequence[StreamMode]) -> StreamMode | list[StreamMode]:
    """``stream_mode`` checked: one of LangGraph's modes, or a non-empty list of them.

    Raises:
        ValueError: a mode LangGraph does not know; the message lists those it does.
    """
    given = [stream_mode] if isinstance(stream_mode, str) else list(stream_mode)
    unknown = [mode for mode in given if mode not in MODES]
    if unknown or not given:
        raise ValueError(
            f"stream_mode {stream_mode!r}: use one of LangGraph's modes {list(MODES)}, or a list"
            ' of them ("updates" for each step\'s update, "messages" for the model\'s tokens)'
        )
    return stream_mode if isinstance(stream_mode, str) else given


async def streamed(
    graph: Any, request: Any, config: RunnableConfig, context: Any, streaming: Streaming
) -> dict[str, Any]:
    """Run ``request`` with ``graph.astream``, emit each chunk of the modes asked for (one mode:
    the chunk; a list: ``(mode, chunk)``), and return what ``ainvoke`` would have: the last
    values, with ``"__interrupt__"`` when the run stopped at one."""
    stream_mode, emit = streaming.stream_mode, streaming.emit
    wanted = [stream_mode] if isinstance(stream_mode, str) else stream_mode
    modes = list(dict.fromkeys([*wanted, *_OWN]))
    latest: dict[str, Any] = {}
    interrupts: list[Any] = []
    async for mode, chunk in graph.astream(request, config, context=context, stream_mode=modes):
        if mode == "values":
            latest = chunk
        elif mode == "updates" and "__interrupt__" in chunk:
            interrupts.extend(chunk["__interrupt__"])
        if mode in wanted:
            emit(chunk if isinstance(stream_mode, str) else (mode, chunk))
    return {**latest, "__interrupt__": interrupts} if interrupts else latest


class _Stream:
    """What both streams share: the turn to run, its agent (kept busy while the turn runs), the
    modes asked for and the turn's time limit."""

    def __init__(
        self,
        run: Run,
        *,
        agent: Runner,
        stream_mode: StreamMode | list[StreamMode],
        timeout: float,
    ) -> None:
        self._run, self._agent, self._mode, self._timeout = run, agent, stream_mode, timeout
        self._started = False
        self._response: Response | None = None

    @property
    def response(self) -> Response:
        """The turn's ``Response`` (as ``prompt`` returns it), once the iteration has ended.

        Raises:
            RuntimeError: the stream was not iterated to its end.
        """
        if self._response is None:
            raise RuntimeError(
                "the turn's response is known once the stream is iterated to its end"
            )
        return self._response

    def _start(self, emit: Emit) -> tuple[concurrent.futures.Future[Response], Callable[[], None]]:
        if self._started:
            raise RuntimeError("a stream runs its turn once: call agent.stream(...) again")
        self._started = True
        run = functools.partial(self._run, streaming=Streaming(self._mode, emit))
        blocking = isinstance(self, TurnStream)
        timed = self._agent._timed(run, self._timeout)
        return self._agent._portal.submit(timed, blocking=blocking)


class TurnStream(_Stream):
    """The chunks of a turn streamed to sync code (``Agent.stream``); then ``response``."""

    def __iter__(self) -> Iterator[Any]:
        items: queue.SimpleQueue[Any] = queue.SimpleQueue()
        with self._agent._busy():
            outcome, cancel = self._start(items.put)
            outcome.add_done_callback(lambda _: items.put(_DONE))
            try:
                while (item := items.get()) is not _DONE:
                    yield item
                self._response = outcome.result()
            finally:
                if not outcome.done():  # the caller stopped: the turn must not go on alone
                    cancel()
                    concurrent.futures.wait([outcome], timeout=CANCEL_WAIT)


class AsyncTurnStream(_Stream):
    """The chunks of a turn streamed to async code (``Agent.astream``); then ``response``.

    An ``async for`` left early does not close its iterator at once (the event loop finalizes
    it later): ``await stream.aclose()`` cancels the turn and frees the agent now.
    """

    _chunks: AsyncGenerator[Any, None] | None = None

    def __aiter__(self) -> AsyncIterator[Any]:
        self._chunks = self._iterate()
        return self._chunks

    async def aclose(self) -> None:
        """Cancel the turn if it still runs, and wait for it to end."""
        if self._chunks is not None:
            await self._chunks.aclose()

    async def _iterate(self) -> AsyncGenerator[Any, None]:
        loop = asyncio.get_running_loop()
        items: asyncio.Queue[Any] = asyncio.Queue()
        with self._agent._busy():

            def emit(item: Any) -> None:
                loop.call_soon_threadsafe(items.put_nowait, item)

            outcome, cancel = self._start(emit)
            waiting = asyncio.wrap_future(outcome)
            waiting.add_done_callback(lambda _: items.put_nowait(_DONE))
            try:
                while (item := await items.get()) is not _DONE:
                    yield item
                self._response = await waiting
            finally:
                if not waiting.done():
                    cancel()
                    await asyncio.wait([waiting], timeout=CANCEL_WAIT)
