"""MCP's server spans: the SDK's own, with what the conventions recommend and it leaves out.

(docs/observe-traces.md) The ``mcp`` SDK (2.3) opens a SERVER span per request by default,
``OpenTelemetryMiddleware`` in ``Server.middleware``: ``tools/call {tool}`` with
``mcp.method.name``, ``mcp.protocol.version``, ``jsonrpc.request.id``, ``gen_ai.tool.name``,
``gen_ai.operation.name=execute_tool``, ``error.type`` (``tool_error`` for an ``isError`` result,
the JSON-RPC code for a protocol error), its parent the context a client put in
``params._meta`` (``traceparent``/``tracestate``), else the current span (the HTTP request's).
The executor's ``execute_tool`` span of the call nests under it.

The GenAI conventions' ``mcp.md`` (semantic-conventions-genai, Development status, read at
commit 0393513) also recommend, and the SDK does not set:

- a link to the ambient span (the HTTP request's) when ``params._meta`` gave the parent, so a
  trace view joins the transport to the call (``AmbientSpan``, outermost, notes the ambient
  span; ``TransportDetails``, innermost, links it);
- ``network.transport=tcp``, ``network.protocol.name=http``, ``network.protocol.version``,
  ``client.address`` and ``client.port``: how the request came.

Both are ``ServerMiddleware`` around the SDK's, added by ``instrument(server)``; without an SDK
provider they cost a context variable's set and reset.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from opentelemetry import trace
from opentelemetry.trace import SpanContext
from starlette.requests import Request

from turnkit.observe.spans import remote_parent

__all__ = ["AmbientSpan", "TransportDetails", "instrument"]

_ambient: ContextVar[SpanContext | None] = ContextVar("turnkit_mcp_ambient", default=None)
"""The span current when the request reached the MCP server (the HTTP request's)."""


class AmbientSpan:
    """Note the span current before the SDK's span starts, for ``TransportDetails``."""

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        token = _ambient.set(trace.get_current_span().get_span_context())
        try:
            return await call_next(ctx)
        finally:
            _ambient.reset(token)


class TransportDetails:
    """Set the transport's attributes on the SDK's span (current here), and link the ambient
    span when the client's ``params._meta`` gave the parent."""

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        span = trace.get_current_span()
        if span.is_recording():
            attributes: dict[str, Any] = {
                "network.transport": "tcp",
                "network.protocol.name": "http",
            }
            if isinstance(ctx.request, Request):
                version = ctx.request.scope.get("http_version")
                if version:
                    attributes["network.protocol.version"] = str(version)
                if ctx.request.client is not None:
                    attributes["client.address"] = ctx.request.client.host
                    attributes["client.port"] = ctx.request.client.port
            span.set_attributes(attributes)
            ambient = _ambient.get()
            if ambient is not None and ambient.is_valid and remote_parent(ctx.meta) is not None:
                span.add_link(ambient, {"turnkit.link": "transport"})
        return await call_next(ctx)


def instrument(server: Server[Any]) -> None:
    """Put ``AmbientSpan`` outside and ``TransportDetails`` inside the SDK's span middleware
    (``server.middleware`` lists the outermost first)."""
    server.middleware = [AmbientSpan(), *server.middleware, TransportDetails()]
