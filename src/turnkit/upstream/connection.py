"""One session with an upstream MCP server per process, held on an event loop of its own.

The official ``mcp`` client is async, and its session lives in one task group. turnkit's
callers are sync code, any running event loop, and LangGraph's server (which refuses blocking
calls in async code). So the session lives on a loop in a daemon thread of the upstream's own:
sync callers wait on a ``concurrent.futures.Future`` (``run``), async callers await it
(``arun``), and no caller blocks a loop it does not own. The upstream sees one client.

A request that gets no answer raises ``NoAnswer``, whose ``kind`` says what is known:

- ``unreachable``: the request was never delivered (the connection could not be made: nothing
  listens, the command cannot start, the token's variable is unset). Nothing ran.
- ``lost``: the connection ended while the request was out (the child exited, the server
  closed it). A write's outcome is unknown.
- ``timeout``: no answer within the time given. A write's outcome is unknown.

A session whose transport ended is replaced at the next request, which connects again; a
request is never sent twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import threading
from collections.abc import AsyncIterator, Callable, Coroutine
from concurrent.futures import CancelledError, Future
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import anyio
import httpx2
from mcp import Client, types
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

from turnkit.upstream.config import Target

__all__ = ["Connection", "NoAnswer"]

T = TypeVar("T")
log = logging.getLogger("turnkit.upstream")

CLIENT_INFO = types.Implementation(name="turnkit", version="0.1.0")
HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
"""The HTTP client's own limits (the SDK's defaults); each request's ``timeout`` ends it sooner."""
TEARDOWN_SECONDS = 5.0
"""How long ending a session may take (a stdio child is terminated, then killed, by the SDK)."""
CLOSED = "the upstream's session was closed (McpUpstream.close()) while the request was out"
MAX_PAGES = 100
"""A ``tools/list`` that pages more often than this is cut short: a listing cannot loop."""


class NoAnswer(Exception):
    """A request to the upstream got no answer; ``kind`` says whether it was delivered."""

    def __init__(self, kind: Literal["unreachable", "lost", "timeout"], reason: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason


@dataclass(eq=False)
class _Session:
    """A connected client and the task that holds it open (on the connection's loop)."""

    stop: asyncio.Event = field(default_factory=asyncio.Event)
    client: Client | None = None
    holder: asyncio.Task[None] | None = None
    ended: bool = False
    """The transport's read side ended: a request sent now would be lost."""
    failure: BaseException | None = None
    """Why the holder stopped, when it failed."""

    @property
    def usable(self) -> bool:
        return self.client is not None and not self.ended and not self.stop.is_set()


class Connection:
    """The session with one upstream, made on first use and again after it ended."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.on_tools_changed: Callable[[], None] = lambda: None
        """Called (on the connection's loop) when the upstream says its tool list changed."""
        self.on_connected: Callable[[], None] = lambda: None
        """Called (on the connection's loop) after each new session: the upstream may have
        restarted as another version, so what it lists is read again before it is trusted."""
        self._guard = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._session: _Session | None = None  # read and written on the loop only
        self._connecting: asyncio.Lock | None = None  # made on the loop

    # --- the loop and its thread ----------------------------------------------------------

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._guard:
            alive = self._thread is not None and self._thread.is_alive()
            if self._loop is None or not alive or self._pid != os.getpid():  # new, or forked
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=_serve,
                    args=(loop,),
                    name=f"turnkit-upstream-{self.target.key}",
                    daemon=True,
                )
                thread.start()
                self._loop, self._thread, self._pid = loop, thread, os.getpid()
                self._session, self._connecting = None, None
            return self._loop

    def submit(self, work: Callable[[], Coroutine[Any, Any, T]]) -> Future[T]:
        """Start ``work()`` on the connection's loop; its future."""
        loop = self._running_loop()
        if threading.current_thread() is self._thread:
            raise RuntimeError("an upstream's own loop cannot wait for itself")
        return asyncio.run_coroutine_threadsafe(work(), loop)

    def run(self, work: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """``work()`` run on the connection's loop, waited for in this thread (sync callers;
        ``work`` bounds its own time). ``NoAnswer`` when ``close()`` ended it."""
        try:
            return self.submit(work).result()
        except CancelledError:
            raise NoAnswer("lost", CLOSED) from None

    async def arun(self, work: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """``work()`` run on the connection's loop, awaited from the caller's loop.
        ``NoAnswer`` when ``close()`` ended it; the caller's own cancellation goes on up."""
        try:
            return await asyncio.wrap_future(self.submit(work))
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
            raise NoAnswer("lost", CLOSED) from None

    def close(self) -> None:
        """End the session (a stdio child with it) and the loop's thread; a later request
        starts them again."""
        with self._guard:
            loop, thread = self._loop, self._thread
            self._loop, self._thread = None, None
        if loop is None or thread is None or not thread.is_alive() or self._pid != os.getpid():
            return
        ending = asyncio.run_coroutine_threadsafe(self._end_all(), loop)
        with contextlib.suppress(Exception):
            ending.result(TEARDOWN_SECONDS * 2)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(TEARDOWN_SECONDS)

    async def aclose(self) -> None:
        """Async twin of ``close``: the waiting happens in a worker thread."""
        await asyncio.to_thread(self.close)

    # --- requests (on the loop) -----------------------------------------------------------

    async def connect(self, timeout: float) -> None:
        """Make sure a session is open (connecting when there is none, or it ended)."""
        await self._open(asyncio.get_running_loop().time() + timeout, timeout)

    async def list_tools(self, timeout: float) -> list[types.Tool]:
        """Every tool the upstream lists now, page by page, within ``timeout`` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        session = await self._open(deadline, timeout)
        client = session.client
        assert client is not None  # usable
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            listing = client.list_tools(cursor=cursor, cache_mode="refresh")
            try:
                page = await self._ask(session, listing, deadline, timeout)
            except MCPError as refused:
                raise NoAnswer("unreachable", f"it refused tools/list: {refused.message}") from None
            except NoAnswer:
                raise
            except Exception as unreadable:  # an answer that is not a listing
                reason = f"its tools/list answer cannot be read: {_reason(unreadable)}"
                raise NoAnswer("unreachable", reason) from None
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools

    async def call_tool(
        self, name: str, arguments: dict[str, Any], meta: dict[str, Any], timeout: float
    ) -> types.CallToolResult:
        """One ``tools/call``, sent once, answered within ``timeout`` seconds (connecting
        included); ``NoAnswer`` when it was not."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        session = await self._open(deadline, timeout)
        client = session.client
        assert client is not None  # usable
        remaining = max(deadline - loop.time(), 0.001)
        request = client.call_tool(name, arguments, read_timeout_seconds=remaining, meta=meta)  # type: ignore[arg-type]  # a JSON object is what _meta holds
        return await self._ask(session, request, deadline, timeout)

    async def _ask(
        self, session: _Session, request: Coroutine[Any, Any, T], deadline: float, timeout: float
    ) -> T:
        remaining = max(deadline - asyncio.get_running_loop().time(), 0.001)
        try:
            return await asyncio.wait_for(request, remaining + 0.5)
        except TimeoutError:
            raise NoAnswer("timeout", f"no answer within {timeout:g} s") from None
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                raise NoAnswer("timeout", f"no answer within {timeout:g} s") from None
            if exc.code != CONNECTION_CLOSED:
                raise
        raise await self._closed(session)

    async def _closed(self, session: _Session) -> NoAnswer:
        """Why the connection closed under a request: the session ended, and its failure says
        whether the request could have been delivered (an HTTP connection refused: it was not)."""
        await self._end(session)
        failure = session.failure
        leaves = _leaves(failure) if failure is not None else []
        if leaves and all(isinstance(leaf, httpx2.ConnectError) for leaf in leaves):
            return NoAnswer("unreachable", _reason(failure))
        why = _reason(failure) if failure is not None else "the connection closed"
        return NoAnswer("lost", why)

    # --- the session (on the loop) --------------------------------------------------------

    async def _open(self, deadline: float, timeout: float) -> _Session:
        session = self._session
        if session is not None and session.usable:
            return session
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        remaining = max(deadline - asyncio.get_running_loop().time(), 0.001)
        try:
            async with asyncio.timeout(remaining):
                async with self._connecting:
                    session = self._session
                    if session is not None and session.usable:
                        return session
                    if session is not None:
                        await self._end(session)
                    self._session = session = await self._connect()
                    self.on_connected()
                    return session
        except TimeoutError:
            raise NoAnswer("unreachable", f"no connection within {timeout:g} s") from None

    async def _connect(self) -> _Session:
        session = _Session()
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        session.holder = asyncio.create_task(self._hold(session, ready))
        try:
            await asyncio.shield(ready)
        except asyncio.CancelledError:  # out of time: the holder goes too
            ready.cancel()
            session.holder.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(session.holder, TEARDOWN_SECONDS)
            raise
        except Exception as exc:
            log.warning(
                "upstream %r (%s) cannot be reached: %s",
                self.target.key,
                self.target.describe(),
                _reason(exc),
            )
            raise NoAnswer("unreachable", _reason(exc)) from None
        return session

    async def _hold(self, session: _Session, ready: asyncio.Future[None]) -> None:
        """Hold the session open until it is told to stop or its transport fails."""
        try:
            async with AsyncExitStack() as stack:
                transport = await self._transport(stack, session)
                client = Client(
                    transport,  # the SDK's own transport, its read stream watched
                    cache=None,
                    client_info=CLIENT_INFO,
                    message_handler=self._message,
                )
                await stack.enter_async_context(client)
                session.client = client
                if not ready.done():
                    ready.set_result(None)
                await session.stop.wait()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            session.failure = exc
            if not ready.done():
                ready.set_exception(exc)
            elif not session.stop.is_set():
                log.warning(
                    "upstream %r (%s): the connection ended: %s",
                    self.target.key,
                    self.target.describe(),
                    _reason(exc),
                )
        finally:
            session.ended = True

    async def _transport(self, stack: AsyncExitStack, session: _Session) -> Any:
        """The SDK's transport for the target, its read side watched for its end."""
        target = self.target
        if target.url is not None:
            headers = dict(target.headers)
            if target.token_env is not None:
                token = os.environ.get(target.token_env)
                if not token:
                    raise LookupError(
                        f"the environment variable {target.token_env} (token_env) is not set;"
                        " set it to the upstream's bearer token"
                    )
                headers["Authorization"] = f"Bearer {token}"
            http = await stack.enter_async_context(
                httpx2.AsyncClient(headers=headers, timeout=HTTP_TIMEOUT)
            )
            return _watched(streamable_http_client(target.url, http_client=http), session)
        params = StdioServerParameters(
            command=target.command[0],
            args=list(target.command[1:]),
            env=dict(target.env) or None,
            cwd=target.cwd,
        )
        return _watched(stdio_client(params, errlog=_errlog()), session)

    async def _message(self, message: Any) -> None:
        """A notification or a transport's error the session surfaces."""
        if isinstance(message, types.ToolListChangedNotification):
            log.info("upstream %r: its tool list changed", self.target.key)
            self.on_tools_changed()

    async def _end(self, session: _Session) -> None:
        session.stop.set()
        holder = session.holder
        if holder is not None and not holder.done():
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(holder), TEARDOWN_SECONDS)
        if self._session is session:
            self._session = None

    async def _end_all(self) -> None:
        """End the session, then every request still out (their callers get ``NoAnswer``)."""
        if self._session is not None:
            await self._end(self._session)
        out = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in out:
            task.cancel()
        if out:
            await asyncio.wait(out, timeout=TEARDOWN_SECONDS)


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        with contextlib.suppress(Exception):
            loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


@asynccontextmanager
async def _watched(transport: Any, session: _Session) -> AsyncIterator[Any]:
    """``transport``'s streams, the read one marking ``session`` ended when it ends."""
    async with transport as (read, write):
        yield _WatchedRead(read, session), write


class _WatchedRead:
    """A read stream that marks its session ended at its end (a child that exited, a client
    whose HTTP connection failed), so the next request connects again instead of being lost."""

    def __init__(self, inner: Any, session: _Session) -> None:
        self._inner = inner
        self._session = session

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._session.ended = True
            raise

    def __aiter__(self) -> _WatchedRead:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        self._session.ended = True
        await self._inner.aclose()

    async def __aenter__(self) -> _WatchedRead:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _errlog() -> Any:
    """Where a stdio child's stderr goes: this process's, when it is a real file."""
    for stream in (sys.stderr, sys.__stderr__):
        try:
            if stream is not None:
                stream.fileno()
                return stream
        except (AttributeError, OSError, ValueError):
            continue
    return open(os.devnull, "w")  # lives as long as the child


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


def _reason(error: BaseException | None) -> str:
    """An exception (the leaves of a group) as one line for a person."""
    if error is None:
        return "the connection closed"
    said = []
    for leaf in _leaves(error):
        text = str(leaf) or type(leaf).__name__
        line = f"{type(leaf).__name__}: {text}" if text != type(leaf).__name__ else text
        if line not in said:
            said.append(line)
    return "; ".join(said)[:500]
