"""MCP at ``/mcp``: the registry served to API-key holders with the official SDK (§9 of
docs/architecture.md).

``mcp_app(executor, keys)`` gives the Streamable HTTP ASGI app and the lifespan its host enters.
Built from the SDK's own parts: the low-level ``Server`` (``tools/list``, ``tools/call``), its
transport security (``Host`` and ``Origin`` checked first: ``mcp_hosts``), its auth context with
a bearer backend that looks the key up in the ledger on **every request** (an unknown, revoked or
expired key is 401 at once, in every process sharing the ledger, saying why: ``mcp_auth``), and
its session manager in stateless JSON mode, so any process on the ledger answers any request.
A small ``tools/call`` has its key looked up in the worker thread that runs the call instead,
one thread hop for both, its 401 the same (``mcp_gate``).
A failure outside what a tool answers reaches the client as a generic error with a logged id,
never as its text (``mcp_errors``).

What a key sees and runs is decided by the executor, now, as over REST (``mcp_tools``). A write
that must wait for a person answers with its confirmation; a person decides it **out of band**
(REST ``POST /v1/confirmations/{id}/approve``, ``turnkit confirmations approve ID``), and the
caller reads the outcome with ``system_get_confirmation``.

There is deliberately no way to approve through MCP: no approval tool, and no elicitation. An
elicitation answer is relayed by the client, and a headless client would approve its own write;
a person's yes must come from a person, through a surface that authenticates them.

Mount it at a path of its own (it answers on any path it is given)::

    mcp, lifespan = mcp_app(executor, ApiKeys(ledger))
    app.router.routes.append(Route("/mcp", mcp))  # or app.mount("/mcp", mcp): then "/mcp/"
    # and in the host's lifespan: async with lifespan(): ...
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from mcp import types
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware, get_access_token
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from turnkit.executor.executor import Executor
from turnkit.ledger.keys import ApiKey, ApiKeys
from turnkit.server import mcp_spans
from turnkit.server.mcp_auth import KeyBackend, KeyToken, KeyVerifier, RequireKey
from turnkit.server.mcp_errors import Failsafe, guarded
from turnkit.server.mcp_gate import KeyGate, pending_key
from turnkit.server.mcp_hosts import HostCheck, transport_security
from turnkit.server.mcp_tools import McpTools, control_of

__all__ = ["KeyToken", "KeyVerifier", "mcp_app", "mcp_server", "request_key"]

SERVER_NAME = "turnkit"
MAX_BODY = 1024 * 1024
"""The largest request body accepted (bytes); a larger one is answered 413 before it is read."""


def request_key(ctx: ServerRequestContext[Any, Any] | None = None) -> ApiKey | None:
    """The API key of the request being handled, or None when it came without one.

    The SDK sets the token in a context variable for requests served in the request's own task
    (protocol 2026-07-28); older clients are served in another task, where the HTTP request of
    ``ctx`` still carries it.
    """
    token = request_token(ctx)
    return None if token is None else token.key


def request_token(ctx: ServerRequestContext[Any, Any] | None = None) -> KeyToken | None:
    """The token of the request being handled (its key, and the settings read with it), or None
    when it came without one (see ``request_key``)."""
    token = get_access_token()
    if token is None and (scope := _scope_of(ctx)) is not None:
        user = scope.get("user")
        token = user.access_token if isinstance(user, AuthenticatedUser) else None
    return token if isinstance(token, KeyToken) else None


def _scope_of(ctx: ServerRequestContext[Any, Any] | None) -> Scope | None:
    """The ASGI scope of the HTTP request ``ctx`` serves (None: not over HTTP)."""
    return ctx.request.scope if ctx is not None and isinstance(ctx.request, Request) else None


def mcp_server(executor: Executor, mcp_path: str = "/mcp", *, inbox: bool = True) -> Server[Any]:
    """The low-level MCP server of ``executor``'s registry, for the request's key; served at
    ``mcp_path`` of its app (a held call's answer names the app's REST API beside it, and its
    web inbox when it serves one: ``inbox``).

    Without a transport in front it has no keys: the SDK's in-memory client (tests) reaches it
    with the token the ``KeyVerifier`` made set in the SDK's auth context.
    """
    tools = McpTools(executor)

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        token = request_token(ctx)
        return await tools.list_tools(
            *((None, None) if token is None else (token.key, token.settings))
        )

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        control = control_of(params.meta)
        scope = _scope_of(ctx)
        root = "" if scope is None else scope.get("root_path", "")
        base = str(root).removesuffix(mcp_path)  # a host app's mount prefix, or ""
        token = request_token(ctx)
        pending = None if token is not None else pending_key(scope)
        if pending is not None:  # a small tools/call: its key is looked up in the call's hop
            return await tools.call_tool_as(
                pending, params.name, params.arguments, control, base, inbox
            )
        key, settings = (None, None) if token is None else (token.key, token.settings)
        return await tools.call_tool(
            key, params.name, params.arguments, control, base, inbox, settings=settings
        )

    server: Server[Any] = Server(
        SERVER_NAME,
        title="turnkit tools",
        instructions=(
            "Tools of this application, as your API key allows now. A write may wait for a"
            " person's confirmation: it answers with a confirmation id, a person decides it"
            " elsewhere, and system_get_confirmation tells you the outcome."
        ),
        get_tool_input_schema=tools.input_schema,
        on_list_tools=guarded(list_tools),
        on_call_tool=guarded(call_tool),
    )
    mcp_spans.instrument(server)  # the SDK's server span, with the transport and its link
    return server


class _Endpoint:
    """The SDK's Streamable HTTP handling, with a new session manager each time the lifespan is
    entered (the SDK's manager runs once; a host may start and stop more than once)."""

    def __init__(self, server: Server[Any], security: TransportSecuritySettings) -> None:
        self.server = server
        self.security = security
        self._manager: StreamableHTTPSessionManager | None = None

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        manager = StreamableHTTPSessionManager(
            app=self.server,
            json_response=True,
            stateless=True,
            max_request_body_size=MAX_BODY,
            security_settings=self.security,
        )
        async with manager.run():
            self._manager = manager
            try:
                yield
            finally:
                self._manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._manager is None:
            raise RuntimeError(
                "the MCP app's lifespan is not running: enter the lifespan mcp_app() returned"
                " in the host application's own lifespan"
            )
        if scope.get("method") == "GET":  # a stream nothing is ever sent on, held open for good
            refused = JSONResponse(
                {"error": "this MCP server is stateless: send requests with POST"},
                status_code=405,
                headers={"Allow": "POST"},
            )
            await refused(scope, receive, send)
            return
        await self._manager.handle_request(scope, receive, send)


def mcp_app(
    executor: Executor,
    keys: ApiKeys,
    mcp_path: str = "/mcp",
    *,
    inbox: bool = True,
    security: TransportSecuritySettings | None = None,
) -> tuple[ASGIApp, Callable[[], AbstractAsyncContextManager[None]]]:
    """The Streamable HTTP ASGI app serving ``executor``'s tools to ``keys``, and its lifespan.

    Mount the app at ``mcp_path`` and enter the lifespan in the host's own lifespan. A request
    is answered when its ``Host`` and ``Origin`` are allowed (``security``; default: loopback
    only, ``mcp_hosts.transport_security``) and it carries ``Authorization: Bearer tk_...`` of
    a key in ``keys`` that is neither revoked nor expired, checked when it arrives (a small
    ``tools/call``'s in the worker thread that runs the call: ``mcp_gate``); otherwise it is
    answered 421/403 or 401, saying why.

    Examples:
        >>> from turnkit import Registry
        >>> executor = Executor(Registry())
        >>> app, lifespan = mcp_app(executor, executor.ledger.keys)
        >>> callable(app), callable(lifespan)
        (True, True)
    """
    security = transport_security() if security is None else security
    endpoint = _Endpoint(mcp_server(executor, mcp_path, inbox=inbox), security)
    guarded_app = AuthContextMiddleware(RequireKey(endpoint))
    verifier = KeyVerifier(  # keys expire by the clock REST reads too
        keys,
        executor.clock,
        settings=executor.settings_with if keys.ledger is executor.ledger else None,
    )
    authenticated = AuthenticationMiddleware(guarded_app, backend=KeyBackend(verifier))
    gate = KeyGate(authenticated, endpoint, verifier.finder)  # tools/call: key and call, one hop
    return Failsafe(HostCheck(gate, security)), endpoint.lifespan
