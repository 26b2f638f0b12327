"""The REST and MCP app for ``langgraph.json``'s ``"http": {"app": ...}``, built when it starts.

LangGraph's server imports the app's module at start-up and takes the object as it is (it must be
a Starlette app then), merging its routes before its own and running its lifespan. The executor
does not exist yet at import — a deployment builds it on first use, in a worker thread — so the
app given is a small Starlette app whose lifespan builds the executor, makes
``turnkit.server.create_app(executor)`` and runs that app's own lifespan (the MCP server); its one
route hands every request the real app answers (``/v1``, ``/mcp``, ``/ui/``, ``/healthz``, ...)
to it, and leaves every other path to LangGraph's routes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.routing import BaseRoute, Match, NoMatchFound
from starlette.types import ASGIApp, Receive, Scope, Send

from turnkit.executor.executor import Executor

__all__ = ["Forward", "deferred_app"]


class Forward(BaseRoute):
    """A route matching what the app it forwards to answers; nothing until it has one.

    ``app`` is the ASGI callable LangGraph's server may wrap in its auth middleware
    (``"enable_custom_route_auth": true``); it passes the request on unchanged.
    """

    def __init__(self) -> None:
        self.target: Starlette | None = None
        self.app: ASGIApp = self._forward

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        target = self.target
        if target is None or scope["type"] not in ("http", "websocket"):
            return Match.NONE, {}
        for route in target.router.routes:
            match, _ = route.matches(scope)
            if match is not Match.NONE:
                return Match.FULL, {}
        return Match.NONE, {}

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)

    async def _forward(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self.target is not None  # matched only once there is one
        await self.target(scope, receive, send)

    def url_path_for(self, name: str, /, **path_params: Any) -> Any:
        raise NoMatchFound(name, path_params)


def deferred_app(
    executor: Callable[[], Awaitable[Executor]],
    *,
    prepare: Callable[[Executor], None] | None = None,
    mcp_allowed_hosts: tuple[str, ...] = (),
    mcp_allowed_origins: tuple[str, ...] = (),
) -> Starlette:
    """A Starlette app serving ``create_app(await executor())`` once its lifespan has started.

    Args:
        executor: builds (or returns) the executor without blocking the event loop.
        prepare: called with the executor before the app serves (the demo grants its user the
            right to decide every hold there).
        mcp_allowed_hosts: ``create_app``'s: the ``Host`` names ``/mcp`` answers besides the
            loopback ones (those ``langgraph dev`` listens on).
        mcp_allowed_origins: ``create_app``'s: the browser origins it answers besides those.
    """
    forward = Forward()

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        from turnkit.server import create_app  # FastAPI and mcp: only when served

        built = await executor()
        if prepare is not None:
            prepare(built)
        target = create_app(built, mcp_allowed_hosts=mcp_allowed_hosts,
                            mcp_allowed_origins=mcp_allowed_origins)  # fmt: skip
        async with target.router.lifespan_context(target):
            forward.target = target
            try:
                yield
            finally:
                forward.target = None

    return Starlette(routes=[forward], lifespan=lifespan)
